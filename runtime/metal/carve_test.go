package metal

import (
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
)

// TestCarvedStories260KPassSyntaxCheck carves stories260K on the CPU
// reference and checks the MSL kernel of every case, through a written and
// reopened bundle as `tapmlc test` reads it: where no Metal exists, this is
// the metal target's test (issue 7: every kernel passes the syntax check).
func TestCarvedStories260KPassSyntaxCheck(t *testing.T) {
	model, err := frontend.Load(testenv.Model(t, "stories260K.bin"), frontend.Options{Tokenizer: testenv.Model(t, "tok512.bin")})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := carve.Carve(model.Module, model.Tokenizer, carve.Options{Prompt: "Once upon a time", Steps: 12})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	if _, err := rec.Write(out); err != nil {
		t.Fatal(err)
	}
	b, err := carve.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var ms []*ir.Module
	ops := map[string]bool{}
	for _, c := range b.Manifest.Cases {
		m, err := b.Module(c)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		ops[c.Op] = true
	}
	n, err := msl.CheckModules(ms, msl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n < len(ms) {
		t.Errorf("%d kernels checked for %d cases", n, len(ms))
	}
	t.Logf("%d cases, %d kernels, ops %v: all pass the MSL syntax check", len(ms), n, ops)
}
