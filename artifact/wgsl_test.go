package artifact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// The WGSL generator plugs into the kernel hook: a webgpu build of the tiny
// model holds one .wgsl file per static node.
func TestWGSLKernels(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "build")
	_, man, err := Compile(tiny(t), CompileOptions{
		Target: "webgpu", Supports: wgsl.Supports, Out: dir, Source: "builtin",
		Kernels: &StaticEmitter{Ext: "wgsl", Generate: func(n *ir.Node, in, out []ir.Type) (*codegen.Kernel, error) {
			return wgsl.Generate(n, in, out, wgsl.Options{})
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Kernels) == 0 {
		t.Fatal("no kernels")
	}
	ops := map[string]bool{}
	for _, k := range man.Kernels {
		ops[k.Op] = true
		src, err := os.ReadFile(filepath.Join(dir, k.File))
		if err != nil {
			t.Fatal(err)
		}
		if k.Language != "wgsl" || !strings.HasSuffix(k.File, ".wgsl") || !strings.Contains(string(src), "@compute") {
			t.Errorf("kernel %s: language %s, source:\n%.200s", k.File, k.Language, src)
		}
	}
	if !ops["rms_norm_swiglu"] || !ops["matmul"] {
		t.Errorf("kernel ops %v lack rms_norm_swiglu (fused by the pipeline) or matmul", ops)
	}
	if _, _, err := Load(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d WGSL kernels", len(man.Kernels))
}
