package spirv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDump writes every test case's kernel to $SPIRV_DUMP (when set), for
// inspection with spirv-dis, spirv-cross or naga.
func TestDump(t *testing.T) {
	dir := os.Getenv("SPIRV_DUMP")
	if dir == "" {
		t.Skip("SPIRV_DUMP not set") // opt-in: writes the kernels out for inspection, checks nothing
	}
	for _, c := range testCases() {
		k := generate(t, c, Options{})
		if err := os.WriteFile(filepath.Join(dir, c.name+".spv"), k.Source, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
