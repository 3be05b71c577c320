@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
const D: u32 = 288u;
const EPS: f32 = 1e-05f;
var<workgroup> red: array<f32, 256>;
@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let row_ = wid.x;
  let valid = row_ < 5u;
  let row = min(row_, 4u);
  let base = row * D;
  var acc = 0.0f;
  for (var j = li; j < D; j += 256u) { let v = in0[base + j]; acc = acc + v * v; }
  red[li] = acc;
  workgroupBarrier();
  for (var s_ = 128u; s_ > 0u; s_ = s_ >> 1u) {
    if (li < s_) { red[li] = red[li] + red[li + s_]; }
    workgroupBarrier();
  }
  let inv = 1.0f / sqrt(red[0] / f32(D) + EPS);
  if (valid) {
    for (var j = li; j < D; j += 256u) { out0[base + j] = in1[j] * (inv * in0[base + j]); }
  }
}
