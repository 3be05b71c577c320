@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read> in2: array<f32>;
@group(0) @binding(3) var<storage, read> in3: array<i32>;
@group(0) @binding(4) var<storage, read_write> out0: array<f32>;
const S: u32 = 1u;
const H: u32 = 8u;
const KH: u32 = 4u;
const DH: u32 = 64u;
const T: u32 = 512u;
const GRP: u32 = 2u;
const CH: u32 = 512u;
const WG: u32 = 128u;
const DPT: u32 = 1u;
const SCALE: f32 = 1.25e-01f;
var<workgroup> qs: array<f32, 64>;
var<workgroup> sc: array<f32, 512>;
var<workgroup> red: array<f32, 128>;
@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let row_ = wid.x;
  let valid = row_ < 8u;
  let row = min(row_, 7u);
  let s = row / H;
  let h = row % H;
  let kvh = h / GRP;
  let p = u32(max(in3[0], 0i));
  let len = min(p + s + 1u, T);
  let qb = row * DH;
  for (var d = li; d < DH; d += WG) { qs[d] = in0[qb + d]; }
  workgroupBarrier();
  var m = f32_bits(0xff800000u);
  var l = 0.0f;
  var acc: array<f32, 1>;
  for (var c0 = 0u; c0 < len; c0 += CH) {
    let cn = min(CH, len - c0);
    for (var t = li; t < cn; t += WG) {
      let kb = ((c0 + t) * KH + kvh) * DH;
      var dot = 0.0f;
      for (var d = 0u; d < DH; d++) { dot = dot + qs[d] * in1[kb + d]; }
      sc[t] = dot * SCALE;
    }
  workgroupBarrier();
    var mx = f32_bits(0xff800000u);
    for (var t = li; t < cn; t += WG) { mx = max(mx, sc[t]); }
    red[li] = mx;
    workgroupBarrier();
    for (var s_ = WG / 2u; s_ > 0u; s_ = s_ >> 1u) {
      if (li < s_) { red[li] = max(red[li], red[li + s_]); }
      workgroupBarrier();
    }
    let mnew = max(m, red[0]);
    workgroupBarrier();
    var ps = 0.0f;
    for (var t = li; t < cn; t += WG) { let e = exp(sc[t] - mnew); sc[t] = e; ps = ps + e; }
    red[li] = ps;
    workgroupBarrier();
    for (var s_ = WG / 2u; s_ > 0u; s_ = s_ >> 1u) {
      if (li < s_) { red[li] = red[li] + red[li + s_]; }
      workgroupBarrier();
    }
    let alpha = exp(m - mnew);
    l = l * alpha + red[0];
    for (var j = 0u; j < DPT; j++) {
      let d = li + j * WG;
      if (d < DH) {
        var o = acc[j] * alpha;
        for (var t = 0u; t < cn; t++) { o = o + sc[t] * in2[((c0 + t) * KH + kvh) * DH + d]; }
        acc[j] = o;
      }
    }
    m = mnew;
    workgroupBarrier();
  }
  if (valid) {
    for (var j = 0u; j < DPT; j++) {
      let d = li + j * WG;
      if (d < DH) { out0[qb + d] = acc[j] / l; }
    }
  }
}
fn f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }
