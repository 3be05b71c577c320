// tapml MSL kernel: rope (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
constant uint H = 6u;
constant uint DH = 48u;
constant uint HALF = 24u;
constant uint PAIRS = 24u;
constant uint DIMS = 48u;
constant float freq[24] = {1e+00f, 6.8129206e-01f, 4.641589e-01f, 3.1622776e-01f, 2.1544345e-01f, 1.4677992e-01f, 1e-01f, 6.812921e-02f, 4.6415884e-02f, 3.162278e-02f, 2.1544348e-02f, 1.4677992e-02f, 1e-02f, 6.8129194e-03f, 4.6415897e-03f, 3.1622779e-03f, 2.1544343e-03f, 1.4677995e-03f, 1e-03f, 6.812919e-04f, 4.6415895e-04f, 3.162278e-04f, 2.1544342e-04f, 1.4677996e-04f};
static inline float reduce(float a) {
  const float k = rint(a * 0.15915494309189535f);
  return ((a - k * 6.28125e+00f) - k * 1.9340515e-03f) - k * 1.2556659e-06f;
}
static inline float2 sincos_(float a) {
  const float j = rint(a * 0.63661977236758134f);
  const float r = ((a - j * 1.5703125f) - j * 4.837512969970703125e-4f) - j * 7.54978995489188216e-8f;
  const float z = r * r;
  const float s = r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * (-1.9515295891e-4f)));
  const float c = 1.0f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));
  const int q = (int(uint((int(j) % 4)) + 4u)) % 4;
  const float sn = (q == 3 ? -c : (q == 2 ? -s : (q == 1 ? c : s)));
  const float cs = (q == 3 ? s : (q == 2 ? -c : (q == 1 ? -s : c)));
  return float2(sn, cs);
}
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const int* in1 [[buffer(1)]],
    device float* out0 [[buffer(2)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  const uint i = wid.x * 256u + li;
  if (i >= 1296u) {
    return;
  }
  const uint pi = i % HALF;
  const uint sh = i / HALF;
  const uint base = sh * DH;
  const float pos = float(int(uint(in1[0]) + (sh / H)));
  if (pi < PAIRS) {
    const float2 sc = sincos_(reduce(pos * freq[pi]));
    const float c = sc.y;
    const float sn = sc.x;
    const uint a = base + 2u * pi;
    const uint b = base + 2u * pi + 1u;
    const float x0 = in0[a];
    const float x1 = in0[b];
    out0[a] = x0 * c - x1 * sn;
    out0[b] = x0 * sn + x1 * c;
  } else {
    const uint e = base + DIMS + 2u * (pi - PAIRS);
    out0[e] = in0[e];
    out0[e + 1u] = in0[e + 1u];
  }
}
