// tapml MSL kernel: attention (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
static inline float max_f32(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : (b > a ? b : (signbit(a) ? b : a))); }
constant uint S = 1u;
constant uint H = 8u;
constant uint KH = 4u;
constant uint DH = 64u;
constant uint T = 512u;
constant uint GRP = 2u;
constant uint CH = 512u;
constant uint WG = 128u;
constant uint DPT = 1u;
constant float SCALE = 1.25e-01f;
static inline float f32_bits(uint b) {
  return as_type<float>(b);
}
kernel void tapml_main(
    device const float* in0 [[buffer(0)]],
    device const float* in1 [[buffer(1)]],
    device const float* in2 [[buffer(2)]],
    device const int* in3 [[buffer(3)]],
    device float* out0 [[buffer(4)]],
    uint3 wid [[threadgroup_position_in_grid]],
    uint3 lid [[thread_position_in_threadgroup]],
    uint li [[thread_index_in_threadgroup]]) {
  threadgroup float qs[64];
  threadgroup float sc[512];
  threadgroup float red[128];
  const uint row_ = wid.x;
  const bool valid = row_ < 8u;
  const uint row = min(row_, 7u);
  const uint s = row / H;
  const uint h = row % H;
  const uint kvh = h / GRP;
  const uint p = uint(max(in3[0], 0));
  const uint len = min(p + s + 1u, T);
  const uint qb = row * DH;
  for (uint d = li; d < DH; d += WG) {
    qs[d] = in0[qb + d];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float m = f32_bits(0xff800000u);
  float l = 0.0f;
  float acc[1] = {};
  for (uint c0 = 0u; c0 < len; c0 += CH) {
    const uint cn = min(CH, len - c0);
    for (uint t = li; t < cn; t += WG) {
      const uint kb = ((c0 + t) * KH + kvh) * DH;
      float dot_ = 0.0f;
      for (uint d = 0u; d < DH; d++) {
        dot_ = dot_ + qs[d] * in1[kb + d];
      }
      sc[t] = dot_ * SCALE;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float mx = f32_bits(0xff800000u);
    for (uint t = li; t < cn; t += WG) {
      mx = max_f32(mx, sc[t]);
    }
    red[li] = mx;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s_ = WG / 2u; s_ > 0u; s_ = s_ >> 1u) {
      if (li < s_) {
        red[li] = max_f32(red[li], red[li + s_]);
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const float mnew = max_f32(m, red[0]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float ps = 0.0f;
    for (uint t = li; t < cn; t += WG) {
      const float e = exp(sc[t] - mnew);
      sc[t] = e;
      ps = ps + e;
    }
    red[li] = ps;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s_ = WG / 2u; s_ > 0u; s_ = s_ >> 1u) {
      if (li < s_) {
        red[li] = red[li] + red[li + s_];
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const float alpha = exp(m - mnew);
    l = l * alpha + red[0];
    for (uint j = 0u; j < DPT; j++) {
      const uint d = li + j * WG;
      if (d < DH) {
        float o = acc[j] * alpha;
        for (uint t = 0u; t < cn; t++) {
          o = o + sc[t] * in2[((c0 + t) * KH + kvh) * DH + d];
        }
        acc[j] = o;
      }
    }
    m = mnew;
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (valid) {
    for (uint j = 0u; j < DPT; j++) {
      const uint d = li + j * WG;
      if (d < DH) {
        out0[qb + d] = acc[j] / l;
      }
    }
  }
}
