package spirv

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// controlFlow is a kernel with what the generators write rarely: break,
// continue and return inside loops, else-if chains, helpers that return
// from branches, integer division and remainder by zero and by -1 at MIN,
// shifts by 32 and more, vector components written through a dynamic
// index. out0 and out1 are written for i < 15.
const controlFlow = `@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out1: array<i32>;
fn pick(a: f32, k: i32) -> f32 {
  if (k < 0i) { return -a; } else if (k == 0i) { return 0.5f; }
  return a * f32(k);
}
@compute @workgroup_size(8, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x;
  if (i >= 16u) { return; }
  let x = in0[i];
  var acc: vec2<f32>;
  var n: i32 = x;
  for (var k = 0i; ; k++) {
    if (k >= 6i) { break; }
    if (k == 2i) { continue; }
    for (var j = 0u; j < 3u; j += 1u) {
      if (j == nwg.y + 1u) { break; }
      acc[j % 2u] += pick(f32(k), k - 1i) * select(1.0f, -1.0f, (i >> j) % 2u == 1u);
    }
    n = n / (k - 1i) + n % (x - k) + abs(n) - max(n, -3i) * min(k, 2i);
  }
  if (i == 15u) { return; }
  out0[i] = acc.x * 2.0f + acc.y;
  out1[i] = n + (x << (i + 30u)) + (x >> (i + 33u)) + i32(u32(x) >> 2u) + n / -1i + x % -1i;
}
`

// controlFlowRef computes controlFlow's outputs in Go, with WGSL's
// integer semantics (wrapping arithmetic, x / 0 = x, x % 0 = 0, MIN / -1 =
// MIN, shift amounts modulo 32), for a grid of one workgroup row.
func controlFlowRef(in []int32) ([]float32, []int32) {
	div := func(a, b int32) int32 {
		if b == 0 || a == math.MinInt32 && b == -1 {
			return a
		}
		return a / b
	}
	rem := func(a, b int32) int32 {
		if b == 0 || a == math.MinInt32 && b == -1 {
			return 0
		}
		return a % b
	}
	pick := func(a float32, k int32) float32 {
		switch {
		case k < 0:
			return -a
		case k == 0:
			return 0.5
		}
		return a * float32(k)
	}
	out0, out1 := make([]float32, 15), make([]int32, 15)
	for i := range uint32(15) {
		x := in[i]
		var acc [2]float32
		n := x
		for k := int32(0); k < 6; k++ {
			if k == 2 {
				continue
			}
			for j := uint32(0); j < 2; j++ { // nwg.y = 1: the loop breaks at j = 2
				sign := float32(1)
				if (i>>j)%2 == 1 {
					sign = -1
				}
				acc[j%2] += pick(float32(k), k-1) * sign
			}
			abs := n
			if n < 0 {
				abs = -n
			}
			n = div(n, k-1) + rem(n, x-k) + abs - max(n, -3)*min(k, 2)
		}
		out0[i] = acc[0]*2 + acc[1]
		out1[i] = n + x<<((i+30)%32) + x>>((i+33)%32) + int32(uint32(x)>>2) + div(n, -1) + rem(x, -1)
	}
	return out0, out1
}

// TestControlFlow runs controlFlow's SPIR-V on the Vulkan device (lavapipe
// here) and compares with the Go reference: exactly
// (the float arithmetic is exact on these values).
func TestControlFlow(t *testing.T) {
	g := openGPU(t)
	code, _, err := Translate(controlFlow)
	if err != nil {
		t.Fatal(err)
	}
	in := []int32{0, 1, -1, 7, -7, 100, math.MinInt32, math.MaxInt32, 3, -3, 2, 5, 6, -6, 12345, -99999}
	ty := func(dt ir.DType) ir.Type { return ir.T(dt, ir.S(16)) }
	k := &codegen.Kernel{Language: Language, Op: ir.OpProbe, NodeID: 1, Source: code, Entry: Entry,
		Bindings: []codegen.Binding{
			{Index: 0, Name: "in0", Access: codegen.Read, Type: ty(ir.I32), Input: 0, Output: -1},
			{Index: 1, Name: "out0", Access: codegen.Write, Type: ty(ir.F32), Input: -1, Output: 0},
			{Index: 2, Name: "out1", Access: codegen.Write, Type: ty(ir.I32), Input: -1, Output: 1},
		},
		WorkgroupSize: [3]int{8, 1, 1}, Grid: [3]int{2, 1, 1}}
	got, err := runKernel(g, &ir.Node{ID: 1, Op: ir.OpProbe}, k, []*tensor.Tensor{tensor.FromInt32([]int{16}, in)})
	if err != nil {
		t.Fatal(err)
	}
	want0, want1 := controlFlowRef(in)
	if diff := cmp.Diff(want0, got[0].Float32s()[:15]); diff != "" {
		t.Errorf("out0 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want1, got[1].Int32s()[:15]); diff != "" {
		t.Errorf("out1 (-want +got):\n%s", diff)
	}
}
