// tapml MSL kernel: add (node 7)
#include <metal_stdlib>
using namespace metal;
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const float* in1 [[buffer(1)]],
    device float* out0 [[buffer(2)]],
    uint3 gid [[thread_position_in_grid]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  const uint i = wid.x * 256u + li;
  if (i >= 105u) { return; }
  const float x0 = in0[(i / 21u) * 7u + (i % 7u)];
  const float x1 = in1[((i / 7u) % 3u) * 7u + (i % 7u)];
  const float t0 = (x0 + x1);
  out0[i] = t0;
}
