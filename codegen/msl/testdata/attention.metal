// tapml MSL kernel: attention (node 7), translated from WGSL
#include <metal_stdlib>
using namespace metal;
static inline float max_f32(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : (b > a ? b : (signbit(a) ? b : a))); }
constant uint S = 1u;
constant uint H = 8u;
constant uint KH = 4u;
constant uint T = 512u;
constant uint GRP = 2u;
constant uint CH = 423u;
constant uint WG = 256u;
constant uint G = 16u; // vec4<f32> per head row
constant uint LANES = 16u;
constant uint PL = 17u; // a key's row of part: LANES partial scores, then the score
constant uint NS = 16u;
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
  threadgroup float part[7191];
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
  const uint ks = li / LANES; // key slot
  const uint j = li % LANES; // lane
  const uint qb = row * G;
  const float4 q0 = in0[qb + j];
  float m = f32_bits(0xff7fffffu); // the lowest finite f32
  float ls = 0.0f; // the slot's softmax sum
  float4 acc0 = float4(0.0f);
  for (uint c0 = 0u; c0 < len; c0 += CH) {
    const uint cn = min(CH, len - c0);
    float4 v0_0 = float4(0.0f);
    float4 v1_0 = float4(0.0f);
    float4 v2_0 = float4(0.0f);
    float4 v3_0 = float4(0.0f);
    float4 v4_0 = float4(0.0f);
    float4 v5_0 = float4(0.0f);
    float4 v6_0 = float4(0.0f);
    float4 v7_0 = float4(0.0f);
    {
      const uint r0 = ((c0 + min(ks, cn - 1u)) * KH + kvh) * G;
      v0_0 = in2[r0 + j];
      const uint r1 = ((c0 + min(ks + 16u, cn - 1u)) * KH + kvh) * G;
      v1_0 = in2[r1 + j];
      const uint r2 = ((c0 + min(ks + 32u, cn - 1u)) * KH + kvh) * G;
      v2_0 = in2[r2 + j];
      const uint r3 = ((c0 + min(ks + 48u, cn - 1u)) * KH + kvh) * G;
      v3_0 = in2[r3 + j];
      const uint r4 = ((c0 + min(ks + 64u, cn - 1u)) * KH + kvh) * G;
      v4_0 = in2[r4 + j];
      const uint r5 = ((c0 + min(ks + 80u, cn - 1u)) * KH + kvh) * G;
      v5_0 = in2[r5 + j];
      const uint r6 = ((c0 + min(ks + 96u, cn - 1u)) * KH + kvh) * G;
      v6_0 = in2[r6 + j];
      const uint r7 = ((c0 + min(ks + 112u, cn - 1u)) * KH + kvh) * G;
      v7_0 = in2[r7 + j];
    }
    if (ks < NS) {
      for (uint t = ks; t < cn; t += 128u) {
        const uint r0 = ((c0 + min(t, cn - 1u)) * KH + kvh) * G;
        const float4 k0_0 = in1[r0 + j];
        const uint r1 = ((c0 + min(t + 16u, cn - 1u)) * KH + kvh) * G;
        const float4 k1_0 = in1[r1 + j];
        const uint r2 = ((c0 + min(t + 32u, cn - 1u)) * KH + kvh) * G;
        const float4 k2_0 = in1[r2 + j];
        const uint r3 = ((c0 + min(t + 48u, cn - 1u)) * KH + kvh) * G;
        const float4 k3_0 = in1[r3 + j];
        const uint r4 = ((c0 + min(t + 64u, cn - 1u)) * KH + kvh) * G;
        const float4 k4_0 = in1[r4 + j];
        const uint r5 = ((c0 + min(t + 80u, cn - 1u)) * KH + kvh) * G;
        const float4 k5_0 = in1[r5 + j];
        const uint r6 = ((c0 + min(t + 96u, cn - 1u)) * KH + kvh) * G;
        const float4 k6_0 = in1[r6 + j];
        const uint r7 = ((c0 + min(t + 112u, cn - 1u)) * KH + kvh) * G;
        const float4 k7_0 = in1[r7 + j];
        if (t < cn) {
          part[(t) * PL + j] = dot(q0, k0_0);
        }
        if (t + 16u < cn) {
          part[(t + 16u) * PL + j] = dot(q0, k1_0);
        }
        if (t + 32u < cn) {
          part[(t + 32u) * PL + j] = dot(q0, k2_0);
        }
        if (t + 48u < cn) {
          part[(t + 48u) * PL + j] = dot(q0, k3_0);
        }
        if (t + 64u < cn) {
          part[(t + 64u) * PL + j] = dot(q0, k4_0);
        }
        if (t + 80u < cn) {
          part[(t + 80u) * PL + j] = dot(q0, k5_0);
        }
        if (t + 96u < cn) {
          part[(t + 96u) * PL + j] = dot(q0, k6_0);
        }
        if (t + 112u < cn) {
          part[(t + 112u) * PL + j] = dot(q0, k7_0);
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint t = li; t < cn; t += WG) {
      float d = 0.0f;
      d = d + part[t * PL + 0u];
      d = d + part[t * PL + 1u];
      d = d + part[t * PL + 2u];
      d = d + part[t * PL + 3u];
      d = d + part[t * PL + 4u];
      d = d + part[t * PL + 5u];
      d = d + part[t * PL + 6u];
      d = d + part[t * PL + 7u];
      d = d + part[t * PL + 8u];
      d = d + part[t * PL + 9u];
      d = d + part[t * PL + 10u];
      d = d + part[t * PL + 11u];
      d = d + part[t * PL + 12u];
      d = d + part[t * PL + 13u];
      d = d + part[t * PL + 14u];
      d = d + part[t * PL + 15u];
      part[t * PL + LANES] = d * SCALE;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (ks < NS) {
      for (uint t = ks; t < cn; t += 128u) {
        const float s0 = (t < cn ? part[min(t, cn - 1u) * PL + LANES] : m);
        const float s1 = (t + 16u < cn ? part[min(t + 16u, cn - 1u) * PL + LANES] : m);
        const float s2 = (t + 32u < cn ? part[min(t + 32u, cn - 1u) * PL + LANES] : m);
        const float s3 = (t + 48u < cn ? part[min(t + 48u, cn - 1u) * PL + LANES] : m);
        const float s4 = (t + 64u < cn ? part[min(t + 64u, cn - 1u) * PL + LANES] : m);
        const float s5 = (t + 80u < cn ? part[min(t + 80u, cn - 1u) * PL + LANES] : m);
        const float s6 = (t + 96u < cn ? part[min(t + 96u, cn - 1u) * PL + LANES] : m);
        const float s7 = (t + 112u < cn ? part[min(t + 112u, cn - 1u) * PL + LANES] : m);
        const float cm = max_f32(max_f32(max_f32(max_f32(max_f32(max_f32(max_f32(max_f32(m, s0), s1), s2), s3), s4), s5), s6), s7);
        const float alpha = exp(m - cm);
        m = cm;
        const float e0 = (t < cn ? exp(s0 - m) : 0.0f);
        const float e1 = (t + 16u < cn ? exp(s1 - m) : 0.0f);
        const float e2 = (t + 32u < cn ? exp(s2 - m) : 0.0f);
        const float e3 = (t + 48u < cn ? exp(s3 - m) : 0.0f);
        const float e4 = (t + 64u < cn ? exp(s4 - m) : 0.0f);
        const float e5 = (t + 80u < cn ? exp(s5 - m) : 0.0f);
        const float e6 = (t + 96u < cn ? exp(s6 - m) : 0.0f);
        const float e7 = (t + 112u < cn ? exp(s7 - m) : 0.0f);
        ls = ls * alpha + e0 + e1 + e2 + e3 + e4 + e5 + e6 + e7;
        acc0 = acc0 * alpha + e0 * v0_0 + e1 * v1_0 + e2 * v2_0 + e3 * v3_0 + e4 * v4_0 + e5 * v5_0 + e6 * v6_0 + e7 * v7_0;
        if (t + 128u < cn) {
          const uint r0 = ((c0 + min(t + 128u, cn - 1u)) * KH + kvh) * G;
          v0_0 = in2[r0 + j];
          const uint r1 = ((c0 + min(t + 128u + 16u, cn - 1u)) * KH + kvh) * G;
          v1_0 = in2[r1 + j];
          const uint r2 = ((c0 + min(t + 128u + 32u, cn - 1u)) * KH + kvh) * G;
          v2_0 = in2[r2 + j];
          const uint r3 = ((c0 + min(t + 128u + 48u, cn - 1u)) * KH + kvh) * G;
          v3_0 = in2[r3 + j];
          const uint r4 = ((c0 + min(t + 128u + 64u, cn - 1u)) * KH + kvh) * G;
          v4_0 = in2[r4 + j];
          const uint r5 = ((c0 + min(t + 128u + 80u, cn - 1u)) * KH + kvh) * G;
          v5_0 = in2[r5 + j];
          const uint r6 = ((c0 + min(t + 128u + 96u, cn - 1u)) * KH + kvh) * G;
          v6_0 = in2[r6 + j];
          const uint r7 = ((c0 + min(t + 128u + 112u, cn - 1u)) * KH + kvh) * G;
          v7_0 = in2[r7 + j];
        }
      }
    }
    if (c0 + CH < len) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
  float l = ls;
  if (ks >= 4u && ks < 16u) {
    racc[(ks - 1u) * G + j] = acc0;
    if (j == 0u) {
      rml[ks - 1u] = float2(m, l);
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (ks < 4u) {
    const float2 o1 = rml[ks + 3u];
    const float2 o2 = rml[ks + 7u];
    const float2 o3 = rml[ks + 11u];
    const float mm = max_f32(max_f32(max_f32(m, o1.x), o2.x), o3.x);
    const float a = exp(m - mm);
    const float b1 = exp(o1.x - mm);
    const float b2 = exp(o2.x - mm);
    const float b3 = exp(o3.x - mm);
    m = mm;
    l = l * a + o1.y * b1 + o2.y * b2 + o3.y * b3;
    acc0 = acc0 * a + racc[(ks + 3u) * G + j] * b1 + racc[(ks + 7u) * G + j] * b2 + racc[(ks + 11u) * G + j] * b3;
  }
  if (ks >= 1u && ks < 4u) {
    racc[(ks - 1u) * G + j] = acc0;
    if (j == 0u) {
      rml[ks - 1u] = float2(m, l);
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (ks < 1u) {
    const float2 o1 = rml[ks];
    const float2 o2 = rml[ks + 1u];
    const float2 o3 = rml[ks + 2u];
    const float mm = max_f32(max_f32(max_f32(m, o1.x), o2.x), o3.x);
    const float a = exp(m - mm);
    const float b1 = exp(o1.x - mm);
    const float b2 = exp(o2.x - mm);
    const float b3 = exp(o3.x - mm);
    m = mm;
    l = l * a + o1.y * b1 + o2.y * b2 + o3.y * b3;
    acc0 = acc0 * a + racc[(ks) * G + j] * b1 + racc[(ks + 1u) * G + j] * b2 + racc[(ks + 2u) * G + j] * b3;
  }
  if (valid && ks == 0u) {
    out0[qb + j] = acc0 / l;
  }
}
