package wgslfront_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/codegen/wgslfront"
)

// TestGeneratedKernels parses the kernel codegen/wgsl writes for every
// generator case, and the dialect kernel: the front end takes everything
// the generator writes, and the webgpu kernels use no extension.
func TestGeneratedKernels(t *testing.T) {
	for _, c := range kerneltest.Cases() {
		k, err := wgsl.Generate(c.Node(t), c.In, nil, wgsl.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		m, err := wgslfront.Parse(string(k.Source), wgsl.Entry)
		if err != nil {
			t.Errorf("%s: %v\n%s", c.Name, err, k.Source)
			continue
		}
		if m.F16 || m.Subgroups {
			t.Errorf("%s: the webgpu kernel enables an extension", c.Name)
		}
	}
	m, err := wgslfront.Parse(kerneltest.DialectKernel, "main")
	if err != nil {
		t.Fatal(err)
	}
	if !m.F16 || !m.Subgroups {
		t.Errorf("the dialect kernel: f16 %v, subgroups %v", m.F16, m.Subgroups)
	}
}

// FuzzParse checks that Parse never panics and that every error is an
// *Error at a position inside the source.
func FuzzParse(f *testing.F) {
	gen := func(c kerneltest.Case) (*codegen.Kernel, error) {
		return wgsl.Generate(c.Node(f), c.In, nil, wgsl.Options{Tuning: wgsl.DiscreteTuning()})
	}
	for _, src := range kerneltest.Sources(f, gen, "add", "gemv_t", "tiled_vec", "softmax", "attention", "constant_i32", "rope") {
		f.Add(src)
	}
	f.Add(kerneltest.DialectKernel)
	f.Add(kerneltest.MatrixKernel)
	f.Add(kerneltest.MatrixScaleKernel)
	f.Add(kerneltest.MatrixLoopKernel)
	f.Fuzz(func(t *testing.T, src string) {
		_, err := wgslfront.Parse(src, "main")
		if err == nil {
			return
		}
		var perr *wgslfront.Error
		if !errors.As(err, &perr) {
			t.Fatalf("error %v is not an *Error", err)
		}
		if strings.Contains(perr.Msg, "internal error") {
			t.Fatalf("%v", err)
		}
		if lines := strings.Count(src, "\n") + 1; perr.Pos.Line < 1 || perr.Pos.Line > lines || perr.Pos.Col < 1 {
			t.Fatalf("error %v outside the source's %d lines", err, lines)
		}
	})
}
