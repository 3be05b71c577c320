// tapml MSL kernel: matmul (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
constant uint N = 32000u;
constant uint KA = 72u; // K in units of vec4<f32>
constant uint KU = 72u; // K in chunks of 4 elements
constant uint R = 64u; // rows per workgroup
constant uint L = 4u; // lanes per row
kernel void tapml_main(
    device const float4* in0 [[buffer(0)]],
    device const float4* in1 [[buffer(1)]],
    device float* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float red[256];
  const uint ab = 0u;
  const uint bb = 0u;
  const uint lane = li % L;
  const uint r = li / L;
  const uint n_ = wid.x * R + r;
  const bool valid = n_ < N;
  const uint n = min(n_, N - 1u);
  float acc = 0.0f;
  for (uint k = lane; k < KU; k += L) {
    acc = acc + dot(in0[ab + k], in1[bb + (n * KU + k)]);
  }
  red[li] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s_ = L / 2u; s_ > 0u; s_ = s_ >> 1u) {
    if (lane < s_) {
      red[li] = red[li] + red[li + s_];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  acc = red[li];
  if (valid && lane == 0u) {
    out0[wid.z * N + n] = acc;
  }
}
