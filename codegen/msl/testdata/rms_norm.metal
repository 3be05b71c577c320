// tapml MSL kernel: rms_norm (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
constant uint D = 288u;
constant float EPS = 1e-05f;
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const float* in1 [[buffer(1)]],
    device float* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float red[256];
  const uint row_ = wid.x;
  const bool valid = row_ < 5u;
  const uint row = min(row_, 4u);
  const uint base = row * D;
  float acc = 0.0f;
  for (uint j = li; j < D; j += 256u) {
    const float v = in0[base + j];
    acc = acc + v * v;
  }
  red[li] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s_ = 128u; s_ > 0u; s_ = s_ >> 1u) {
    if (li < s_) {
      red[li] = red[li] + red[li + s_];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const float inv = 1.0f / sqrt(red[0] / float(D) + EPS);
  if (valid) {
    for (uint j = li; j < D; j += 256u) {
      out0[base + j] = in1[j] * (inv * in0[base + j]);
    }
  }
}
