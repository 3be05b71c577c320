// tapml MSL kernel: neg (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
kernel void tapml_main(
    device const int* in0 [[buffer(0)]],
    device int* out0 [[buffer(1)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  const uint i = wid.x * 256u + li;
  if (i >= 12u) {
    return;
  }
  const int x0 = in0[i];
  const int t0 = (int(0u - uint(x0)));
  out0[i] = t0;
}
