// tapml MSL kernel: add (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const float* in1 [[buffer(1)]],
    device float* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  const uint i = wid.x * 256u + li;
  if (i >= 105u) {
    return;
  }
  uint r_ = i;
  const uint c2 = r_ % 7u;
  r_ = r_ / 7u;
  const uint c1 = r_ % 3u;
  r_ = r_ / 3u;
  const uint c0 = r_;
  const float x0 = in0[c0 * 7u + c2];
  const float x1 = in1[c1 * 7u + c2];
  const float t0 = (x0 + x1);
  out0[i] = t0;
}
