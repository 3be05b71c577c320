@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> in1: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
const N: u32 = 32000u;
const KA: u32 = 72u; // K in units of vec4<f32>
const KU: u32 = 72u; // K in chunks of 4 elements
const R: u32 = 64u; // rows per workgroup
const L: u32 = 4u; // lanes per row
var<workgroup> red: array<f32, 256>;
@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let ab = 0u;
  let bb = 0u;
  let lane = li % L;
  let r = li / L;
  let n_ = wid.x * R + r;
  let valid = n_ < N;
  let n = min(n_, N - 1u);
  var acc = 0.0f;
  for (var k = lane; k < KU; k += L) {
    acc = acc + dot(in0[ab + k], in1[bb + (n * KU + k)]);
  }
  red[li] = acc;
  workgroupBarrier();
  for (var s_ = L / 2u; s_ > 0u; s_ = s_ >> 1u) {
    if (lane < s_) { red[li] = red[li] + red[li + s_]; }
    workgroupBarrier();
  }
  acc = red[li];
  if (valid && lane == 0u) { out0[wid.z * N + n] = acc; }
}
