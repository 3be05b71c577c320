package webgpu

import (
	"os"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
)

// TestGLBackend runs the op cases and the Tiny end-to-end check on the GL
// backend (Mesa's llvmpipe here). Opt-in with TAPML_TEST_GL=1: GL compiles
// shaders at first dispatch (tens of seconds on a cold Mesa cache), and a
// machine without EGL aborts the process.
func TestGLBackend(t *testing.T) {
	if os.Getenv("TAPML_TEST_GL") != "1" {
		t.Skip("set TAPML_TEST_GL=1 to run the GL backend")
	}
	d, err := Open(Options{Backend: "gl"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t.Log(d.Name())
	for i, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			in := c.gen(newRand(uint64(i) + 1))
			types := make([]ir.Type, len(in))
			for j, x := range in {
				types[j] = x.Type()
			}
			n, outs := mkNode(t, 100+i, c.op, c.attrs, types...)
			want := reference(t, n, outs, in...)
			got, err := run(t, d, n, outs, in...)
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				compare(t, c.name, want[j], got[j], c.tol)
			}
		})
	}
	t.Run("tiny", func(t *testing.T) {
		m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 10))
		if err != nil {
			t.Fatal(err)
		}
		g, ref := newGreedy(t, m, d), newGreedy(t, m, refDev)
		tok := []int32{1, 72, 101}
		for s := 0; s < 5; s++ {
			got, want := g.step(t, tok), ref.step(t, tok)
			if a, b := argmaxF32(got), argmaxF32(want); a != b {
				t.Fatalf("step %d: token %d, want %d", s, a, b)
			}
			tok = []int32{argmaxF32(want)}
		}
	})
}
