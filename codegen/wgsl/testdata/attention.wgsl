@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> in1: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> in2: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> in3: array<i32>;
@group(0) @binding(4) var<storage, read_write> out0: array<vec4<f32>>;
const S: u32 = 1u;
const H: u32 = 8u;
const KH: u32 = 4u;
const T: u32 = 512u;
const GRP: u32 = 2u;
const CH: u32 = 182u;
const WG: u32 = 256u;
const G: u32 = 16u; // vec4<f32> per head row
const LANES: u32 = 16u;
const PL: u32 = 17u; // a key's row of part: LANES partial scores, then the score
const NS: u32 = 16u;
const SCALE: f32 = 1.25e-01f;
var<workgroup> part: array<f32, 3094>;
var<workgroup> racc: array<vec4<f32>, 240>;
var<workgroup> rml: array<vec2<f32>, 15>;
@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let row_ = wid.x;
  let valid = row_ < 8u;
  let row = min(row_, 7u);
  let s = row / H;
  let h = row % H;
  let kvh = h / GRP;
  let p = u32(max(in3[0], 0i));
  let len = min(p + s + 1u, T);
  let ks = li / LANES; // key slot
  let j = li % LANES; // lane
  let qb = row * G;
  let q0 = in0[qb + j];
  var m = f32_bits(0xff7fffffu); // the lowest finite f32
  var ls = f32(0); // the slot's softmax sum
  var acc0 = vec4<f32>(0.0f);
  for (var c0 = 0u; c0 < len; c0 += CH) {
    let cn = min(CH, len - c0);
    var v0_0: vec4<f32>;
    var v1_0: vec4<f32>;
    var v2_0: vec4<f32>;
    var v3_0: vec4<f32>;
    var v4_0: vec4<f32>;
    var v5_0: vec4<f32>;
    var v6_0: vec4<f32>;
    var v7_0: vec4<f32>;
    {
      let r0 = ((c0 + min(ks, cn - 1u)) * KH + kvh) * G;
      v0_0 = in2[r0 + j];
      let r1 = ((c0 + min(ks + 16u, cn - 1u)) * KH + kvh) * G;
      v1_0 = in2[r1 + j];
      let r2 = ((c0 + min(ks + 32u, cn - 1u)) * KH + kvh) * G;
      v2_0 = in2[r2 + j];
      let r3 = ((c0 + min(ks + 48u, cn - 1u)) * KH + kvh) * G;
      v3_0 = in2[r3 + j];
      let r4 = ((c0 + min(ks + 64u, cn - 1u)) * KH + kvh) * G;
      v4_0 = in2[r4 + j];
      let r5 = ((c0 + min(ks + 80u, cn - 1u)) * KH + kvh) * G;
      v5_0 = in2[r5 + j];
      let r6 = ((c0 + min(ks + 96u, cn - 1u)) * KH + kvh) * G;
      v6_0 = in2[r6 + j];
      let r7 = ((c0 + min(ks + 112u, cn - 1u)) * KH + kvh) * G;
      v7_0 = in2[r7 + j];
    }
    if (ks < NS) {
      for (var t = ks; t < cn; t += 128u) {
        let r0 = ((c0 + min(t, cn - 1u)) * KH + kvh) * G;
        let k0_0 = in1[r0 + j];
        let r1 = ((c0 + min(t + 16u, cn - 1u)) * KH + kvh) * G;
        let k1_0 = in1[r1 + j];
        let r2 = ((c0 + min(t + 32u, cn - 1u)) * KH + kvh) * G;
        let k2_0 = in1[r2 + j];
        let r3 = ((c0 + min(t + 48u, cn - 1u)) * KH + kvh) * G;
        let k3_0 = in1[r3 + j];
        let r4 = ((c0 + min(t + 64u, cn - 1u)) * KH + kvh) * G;
        let k4_0 = in1[r4 + j];
        let r5 = ((c0 + min(t + 80u, cn - 1u)) * KH + kvh) * G;
        let k5_0 = in1[r5 + j];
        let r6 = ((c0 + min(t + 96u, cn - 1u)) * KH + kvh) * G;
        let k6_0 = in1[r6 + j];
        let r7 = ((c0 + min(t + 112u, cn - 1u)) * KH + kvh) * G;
        let k7_0 = in1[r7 + j];
        if (t < cn) { part[(t) * PL + j] = f32(dot(q0, k0_0)); }
        if (t + 16u < cn) { part[(t + 16u) * PL + j] = f32(dot(q0, k1_0)); }
        if (t + 32u < cn) { part[(t + 32u) * PL + j] = f32(dot(q0, k2_0)); }
        if (t + 48u < cn) { part[(t + 48u) * PL + j] = f32(dot(q0, k3_0)); }
        if (t + 64u < cn) { part[(t + 64u) * PL + j] = f32(dot(q0, k4_0)); }
        if (t + 80u < cn) { part[(t + 80u) * PL + j] = f32(dot(q0, k5_0)); }
        if (t + 96u < cn) { part[(t + 96u) * PL + j] = f32(dot(q0, k6_0)); }
        if (t + 112u < cn) { part[(t + 112u) * PL + j] = f32(dot(q0, k7_0)); }
      }
    }
  workgroupBarrier();
    for (var t = li; t < cn; t += WG) {
      var d = f32(0);
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
    workgroupBarrier();
    if (ks < NS) {
      for (var t = ks; t < cn; t += 128u) {
        let s0 = select(m, part[min(t, cn - 1u) * PL + LANES], t < cn);
        let s1 = select(m, part[min(t + 16u, cn - 1u) * PL + LANES], t + 16u < cn);
        let s2 = select(m, part[min(t + 32u, cn - 1u) * PL + LANES], t + 32u < cn);
        let s3 = select(m, part[min(t + 48u, cn - 1u) * PL + LANES], t + 48u < cn);
        let s4 = select(m, part[min(t + 64u, cn - 1u) * PL + LANES], t + 64u < cn);
        let s5 = select(m, part[min(t + 80u, cn - 1u) * PL + LANES], t + 80u < cn);
        let s6 = select(m, part[min(t + 96u, cn - 1u) * PL + LANES], t + 96u < cn);
        let s7 = select(m, part[min(t + 112u, cn - 1u) * PL + LANES], t + 112u < cn);
        let cm = max(max(max(max(max(max(max(max(m, s0), s1), s2), s3), s4), s5), s6), s7);
        let alpha = exp(m - cm);
        m = cm;
        let e0 = select(0.0f, exp(s0 - m), t < cn);
        let e1 = select(0.0f, exp(s1 - m), t + 16u < cn);
        let e2 = select(0.0f, exp(s2 - m), t + 32u < cn);
        let e3 = select(0.0f, exp(s3 - m), t + 48u < cn);
        let e4 = select(0.0f, exp(s4 - m), t + 64u < cn);
        let e5 = select(0.0f, exp(s5 - m), t + 80u < cn);
        let e6 = select(0.0f, exp(s6 - m), t + 96u < cn);
        let e7 = select(0.0f, exp(s7 - m), t + 112u < cn);
        ls = ls * alpha + e0 + e1 + e2 + e3 + e4 + e5 + e6 + e7;
        acc0 = acc0 * alpha + e0 * v0_0 + e1 * v1_0 + e2 * v2_0 + e3 * v3_0 + e4 * v4_0 + e5 * v5_0 + e6 * v6_0 + e7 * v7_0;
        if (t + 128u < cn) {
          let r0 = ((c0 + min(t + 128u, cn - 1u)) * KH + kvh) * G;
          v0_0 = in2[r0 + j];
          let r1 = ((c0 + min(t + 128u + 16u, cn - 1u)) * KH + kvh) * G;
          v1_0 = in2[r1 + j];
          let r2 = ((c0 + min(t + 128u + 32u, cn - 1u)) * KH + kvh) * G;
          v2_0 = in2[r2 + j];
          let r3 = ((c0 + min(t + 128u + 48u, cn - 1u)) * KH + kvh) * G;
          v3_0 = in2[r3 + j];
          let r4 = ((c0 + min(t + 128u + 64u, cn - 1u)) * KH + kvh) * G;
          v4_0 = in2[r4 + j];
          let r5 = ((c0 + min(t + 128u + 80u, cn - 1u)) * KH + kvh) * G;
          v5_0 = in2[r5 + j];
          let r6 = ((c0 + min(t + 128u + 96u, cn - 1u)) * KH + kvh) * G;
          v6_0 = in2[r6 + j];
          let r7 = ((c0 + min(t + 128u + 112u, cn - 1u)) * KH + kvh) * G;
          v7_0 = in2[r7 + j];
        }
      }
    }
    if (c0 + CH < len) { workgroupBarrier(); } // the next chunk rewrites part
  }
  var l = f32(ls);
  if (ks >= 4u && ks < 16u) {
    racc[(ks - 1u) * G + j] = acc0;
    if (j == 0u) { rml[ks - 1u] = vec2<f32>(m, l); }
  }
  workgroupBarrier();
  if (ks < 4u) {
    let o1 = rml[ks + 3u];
    let o2 = rml[ks + 7u];
    let o3 = rml[ks + 11u];
    let mm = max(max(max(m, o1.x), o2.x), o3.x);
    let a = exp(m - mm);
    let b1 = exp(o1.x - mm);
    let b2 = exp(o2.x - mm);
    let b3 = exp(o3.x - mm);
    m = mm;
    l = l * a + o1.y * b1 + o2.y * b2 + o3.y * b3;
    acc0 = acc0 * a + racc[(ks + 3u) * G + j] * b1 + racc[(ks + 7u) * G + j] * b2 + racc[(ks + 11u) * G + j] * b3;
  }
  if (ks >= 1u && ks < 4u) {
    racc[(ks - 1u) * G + j] = acc0;
    if (j == 0u) { rml[ks - 1u] = vec2<f32>(m, l); }
  }
  workgroupBarrier();
  if (ks < 1u) {
    let o1 = rml[ks];
    let o2 = rml[ks + 1u];
    let o3 = rml[ks + 2u];
    let mm = max(max(max(m, o1.x), o2.x), o3.x);
    let a = exp(m - mm);
    let b1 = exp(o1.x - mm);
    let b2 = exp(o2.x - mm);
    let b3 = exp(o3.x - mm);
    m = mm;
    l = l * a + o1.y * b1 + o2.y * b2 + o3.y * b3;
    acc0 = acc0 * a + racc[(ks) * G + j] * b1 + racc[(ks + 1u) * G + j] * b2 + racc[(ks + 2u) * G + j] * b3;
  }
  if (valid && ks == 0u) {
    out0[qb + j] = acc0 / l;
  }
}
fn f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }
