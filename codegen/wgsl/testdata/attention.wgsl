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
const CH: u32 = 512u;
const WG: u32 = 256u;
const G: u32 = 16u; // vec4<f32> per head row
const LANES: u32 = 16u;
const NS: u32 = 16u;
const DPT: u32 = 1u;
const SCALE: f32 = 1.25e-01f;
var<workgroup> sc: array<f32, 512>;
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
  let qb = row * G;
  let ks = li / LANES; // key slot
  let j = li % LANES; // lane: vectors j, j+LANES, ... of the row
  var m = f32_bits(0xff7fffffu); // the lowest finite f32
  var l = 0.0f;
  var acc: array<vec4<f32>, 1>;
  for (var c0 = 0u; c0 < len; c0 += CH) {
    let cn = min(CH, len - c0);
    for (var t = li; t < cn; t += WG) {
      let kb = ((c0 + t) * KH + kvh) * G;
      var d = 0.0f;
      for (var e = 0u; e < G; e++) { d = d + dot(in0[qb + e], in1[kb + e]); }
      sc[t] = d * SCALE;
    }
  workgroupBarrier();
    if (ks < NS) {
      var cm = m;
      for (var t = ks; t < cn; t += NS) { cm = max(cm, sc[t]); }
      let alpha = exp(m - cm);
      m = cm;
      for (var i = 0u; i < DPT; i++) { acc[i] = acc[i] * alpha; }
      var ps = f32(0);
      for (var t = ks; t < cn; t += 4u * NS) {
        let t1 = min(t + NS, cn - 1u);
        let t2 = min(t + 2u * NS, cn - 1u);
        let t3 = min(t + 3u * NS, cn - 1u);
        let e0 = exp(sc[t] - m);
        let e1 = select(0.0f, exp(sc[t1] - m), t + NS < cn);
        let e2 = select(0.0f, exp(sc[t2] - m), t + 2u * NS < cn);
        let e3 = select(0.0f, exp(sc[t3] - m), t + 3u * NS < cn);
        ps = ps + e0 + e1 + e2 + e3;
        let r0 = ((c0 + t) * KH + kvh) * G;
        let r1 = ((c0 + t1) * KH + kvh) * G;
        let r2 = ((c0 + t2) * KH + kvh) * G;
        let r3 = ((c0 + t3) * KH + kvh) * G;
        for (var i = 0u; i < DPT; i++) {
          let d = j + i * LANES;
          acc[i] = acc[i] + e0 * in2[r0 + d] + e1 * in2[r1 + d] + e2 * in2[r2 + d] + e3 * in2[r3 + d];
        }
      }
      l = l * alpha + f32(ps);
    }
  }
  for (var hs = NS / 2u; hs > 0u; hs = hs >> 1u) {
    if (ks >= hs && ks < 2u * hs) {
      for (var i = 0u; i < DPT; i++) {
        let d = j + i * LANES;
        racc[(ks - 1u) * G + d] = acc[i];
      }
      if (j == 0u) { rml[ks - 1u] = vec2<f32>(m, l); }
    }
    workgroupBarrier();
    if (ks < hs) {
      let o = rml[ks + hs - 1u];
      let mm = max(m, o.x);
      let a = exp(m - mm);
      let b = exp(o.x - mm);
      m = mm;
      l = l * a + o.y * b;
      for (var i = 0u; i < DPT; i++) {
        let d = j + i * LANES;
        acc[i] = acc[i] * a + racc[(ks + hs - 1u) * G + d] * b;
      }
    }
  }
  if (valid && ks == 0u) {
    for (var i = 0u; i < DPT; i++) {
      let d = j + i * LANES;
      out0[qb + d] = acc[i] / l;
    }
  }
}
fn f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }
