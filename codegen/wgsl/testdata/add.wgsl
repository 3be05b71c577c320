@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let i = wid.x * 256u + li;
  if (i >= 105u) { return; }
  var r_ = i;
  let c2 = r_ % 7u; r_ = r_ / 7u;
  let c1 = r_ % 3u; r_ = r_ / 3u;
  let c0 = r_;
  let x0: f32 = in0[c0 * 7u + c2];
  let x1: f32 = in1[c1 * 7u + c2];
  let t0: f32 = (x0 + x1);
  out0[i] = t0;
}
