package webgpu

import (
	"math/rand/v2"
	"testing"

	"github.com/tapml/tapml/codegen/fault"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// TestFaultsChangeResults injects each fault of the WGSL generator into kernels
// it applies to, through Device.SetFault, and checks that the kernel still
// compiles and runs, and that its result now differs from the CPU
// reference (except missing_barrier, a data race whose effect depends on
// how the driver schedules invocations: its result is only logged).
func TestFaultsChangeResults(t *testing.T) {
	cases := map[string]opCase{}
	for _, c := range opCases() {
		cases[c.name] = c
	}
	big := func(c opCase, scale float32) opCase {
		gen := c.gen
		c.gen = func(r *rand.Rand) []*tensor.Tensor {
			in := gen(r)
			for _, x := range in {
				if x.DType == ir.F32 && x.NumElements() > 1 {
					for i := range x.Float32s() {
						x.Float32s()[i] *= scale
					}
				}
			}
			return in
		}
		return c
	}
	type fc struct {
		fault string
		c     opCase
	}
	var list []fc
	for _, name := range []string{"add-broadcast", "exp[7 33]", "fused mul(silu($0), $1)", "constant values", "cast f32->i32",
		"gather 260K", "matmul gemv 15M w1", "matmul gemv not transposed", "matmul prefill 260K", "rms_norm 260K",
		"layer_norm odd", "softmax [8 1 17] axis -1", "argmax [6 5 7] axis 1", "rope 260K decode", "kv_write 260K decode",
		"attention 15M decode", "reshape", "transpose 3d", "slice strided", "concat axis0"} {
		list = append(list, fc{fault.WrongIndex, cases[name]})
	}
	for _, name := range []string{"rms_norm 260K", "layer_norm odd", "rope 260K decode", "attention 15M decode",
		"constant values", "gelu[1000]", "fused add(mul($0, 0.5), tanh(sub($1, $2)))"} {
		list = append(list, fc{fault.WrongConstant, cases[name]})
	}
	for _, name := range []string{"matmul prefill 260K", "matmul gemv 15M w1", "rms_norm 15M prefill",
		"attention 15M prefill", "exp[1000]", "matmul gemv not transposed odd"} {
		list = append(list, fc{fault.F16Overflow, big(cases[name], 400)})
	}
	// softmax subtracts the max, so only inputs beyond the f16 range overflow.
	list = append(list, fc{fault.F16Overflow, big(cases["softmax [1 32000] axis -1"], 2e4)})
	for _, name := range []string{"matmul tiled 128", "matmul gemv 15M w2", "rms_norm 15M prefill", "layer_norm odd",
		"softmax [1 32000] axis -1", "argmax [2 513] axis -1", "attention 15M prefill"} {
		list = append(list, fc{fault.MissingBarrier, cases[name]})
	}
	for i, f := range list {
		c := f.c
		if c.op == ir.OpNone {
			t.Fatalf("case %d: no such op case", i)
		}
		t.Run(f.fault+" "+c.name, func(t *testing.T) {
			in := c.gen(newRand(uint64(i) + 77))
			types := make([]ir.Type, len(in))
			for j, x := range in {
				types[j] = x.Type()
			}
			n, outs := mkNode(t, 5000+i, c.op, c.attrs, types...)
			want := reference(t, n, outs, in...)
			testDev.SetFault(n.ID, f.fault)
			defer testDev.SetFault(n.ID, "")
			got, err := run(t, testDev, n, outs, in...)
			if err != nil {
				t.Fatal(err)
			}
			same := sameWithin(want[0], got[0], c.tol)
			if f.fault == fault.MissingBarrier {
				t.Logf("missing barrier: result differs from the reference: %v", !same)
				return
			}
			if same {
				t.Errorf("fault %s left the result of %s unchanged", f.fault, c.name)
			}
		})
	}
}

func sameWithin(want, got *tensor.Tensor, tl tol) bool {
	for i := 0; i < want.NumElements(); i++ {
		w, g := want.Float64At(i), got.Float64At(i)
		if w == g || (w != w && g != g) {
			continue
		}
		d := g - w
		if d < 0 {
			d = -d
		}
		if tl.Exact || !(d <= tl.Abs+tl.Rel*abs(w)) {
			return false
		}
	}
	return true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
