// tapml MSL kernel: attention (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
static inline float max_f32(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : (b > a ? b : (signbit(a) ? b : a))); }
constant uint S = 1u;
constant uint H = 8u;
constant uint KH = 4u;
constant uint T = 512u;
constant uint GRP = 2u;
constant uint CH = 512u;
constant uint WG = 256u;
constant uint G = 16u; // vec4<f32> per head row
constant uint LANES = 16u;
constant uint NS = 16u;
constant uint DPT = 1u;
constant float SCALE = 1.25e-01f;
static inline float f32_bits(uint b) {
  return as_type<float>(b);
}
kernel void tapml_main(
    device const float4* in0 [[buffer(0)]],
    device const float4* in1 [[buffer(1)]],
    device const float4* in2 [[buffer(2)]],
    device const int* in3 [[buffer(3)]],
    device float4* out0 [[buffer(4)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float sc[512];
  threadgroup float4 racc[240];
  threadgroup float2 rml[15];
  const uint row_ = wid.x;
  const bool valid = row_ < 8u;
  const uint row = min(row_, 7u);
  const uint s = row / H;
  const uint h = row % H;
  const uint kvh = h / GRP;
  const uint p = uint(max(in3[0], 0));
  const uint len = min(p + s + 1u, T);
  const uint qb = row * G;
  const uint ks = li / LANES; // key slot
  const uint j = li % LANES; // lane: vectors j, j+LANES, ... of the row
  float m = f32_bits(0xff7fffffu); // the lowest finite f32
  float l = 0.0f;
  float4 acc[1] = {};
  for (uint c0 = 0u; c0 < len; c0 += CH) {
    const uint cn = min(CH, len - c0);
    for (uint t = li; t < cn; t += WG) {
      const uint kb = ((c0 + t) * KH + kvh) * G;
      float d = 0.0f;
      for (uint e = 0u; e < G; e++) {
        d = d + dot(in0[qb + e], in1[kb + e]);
      }
      sc[t] = d * SCALE;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (ks < NS) {
      float cm = m;
      for (uint t = ks; t < cn; t += NS) {
        cm = max_f32(cm, sc[t]);
      }
      const float alpha = exp(m - cm);
      m = cm;
      for (uint i = 0u; i < DPT; i++) {
        acc[i] = acc[i] * alpha;
      }
      float ps = 0.0f;
      for (uint t = ks; t < cn; t += 4u * NS) {
        const uint t1 = min(t + NS, cn - 1u);
        const uint t2 = min(t + 2u * NS, cn - 1u);
        const uint t3 = min(t + 3u * NS, cn - 1u);
        const float e0 = exp(sc[t] - m);
        const float e1 = (t + NS < cn ? exp(sc[t1] - m) : 0.0f);
        const float e2 = (t + 2u * NS < cn ? exp(sc[t2] - m) : 0.0f);
        const float e3 = (t + 3u * NS < cn ? exp(sc[t3] - m) : 0.0f);
        ps = ps + e0 + e1 + e2 + e3;
        const uint r0 = ((c0 + t) * KH + kvh) * G;
        const uint r1 = ((c0 + t1) * KH + kvh) * G;
        const uint r2 = ((c0 + t2) * KH + kvh) * G;
        const uint r3 = ((c0 + t3) * KH + kvh) * G;
        for (uint i = 0u; i < DPT; i++) {
          const uint d = j + i * LANES;
          acc[i] = acc[i] + e0 * in2[r0 + d] + e1 * in2[r1 + d] + e2 * in2[r2 + d] + e3 * in2[r3 + d];
        }
      }
      l = l * alpha + ps;
    }
  }
  for (uint hs = NS / 2u; hs > 0u; hs = hs >> 1u) {
    if (ks >= hs && ks < 2u * hs) {
      for (uint i = 0u; i < DPT; i++) {
        const uint d = j + i * LANES;
        racc[(ks - 1u) * G + d] = acc[i];
      }
      if (j == 0u) {
        rml[ks - 1u] = float2(m, l);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (ks < hs) {
      const float2 o = rml[ks + hs - 1u];
      const float mm = max_f32(m, o.x);
      const float a = exp(m - mm);
      const float b = exp(o.x - mm);
      m = mm;
      l = l * a + o.y * b;
      for (uint i = 0u; i < DPT; i++) {
        const uint d = j + i * LANES;
        acc[i] = acc[i] * a + racc[(ks + hs - 1u) * G + d] * b;
      }
    }
  }
  if (valid && ks == 0u) {
    for (uint i = 0u; i < DPT; i++) {
      const uint d = j + i * LANES;
      out0[qb + d] = acc[i] / l;
    }
  }
}
