@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
const M: u32 = 67u;
const N: u32 = 33u;
const K: u32 = 45u;
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;
var<workgroup> As: array<f32, 1024>; // [BK][BM]
var<workgroup> Bs: array<f32, 1024>; // [BK][BN]
@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  var r_ = wid.z;
  let c0 = r_;
  let ab = (c0) * 3015u;
  let bb = (0u) * 1485u;
  let tx = li % 16u;
  let ty = li / 16u;
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  var acc0_0 = 0.0f;
  var acc0_1 = 0.0f;
  var acc0_2 = 0.0f;
  var acc0_3 = 0.0f;
  var acc1_0 = 0.0f;
  var acc1_1 = 0.0f;
  var acc1_2 = 0.0f;
  var acc1_3 = 0.0f;
  var acc2_0 = 0.0f;
  var acc2_1 = 0.0f;
  var acc2_2 = 0.0f;
  var acc2_3 = 0.0f;
  var acc3_0 = 0.0f;
  var acc3_1 = 0.0f;
  var acc3_2 = 0.0f;
  var acc3_3 = 0.0f;
  for (var k0 = 0u; k0 < K; k0 += BK) {
    for (var e = li; e < BM * BK; e += 256u) {
      let mm = e / BK; let kk = e % BK; let gm = m0 + mm; let gk = k0 + kk;
      var v = 0.0f;
      if (gm < M && gk < K) { v = in0[ab + gm * K + gk]; }
      As[kk * BM + mm] = v;
    }
    for (var e = li; e < BN * BK; e += 256u) {
      let nn = e / BK; let kk = e % BK; let gn = n0 + nn; let gk = k0 + kk;
      var v = 0.0f;
      if (gn < N && gk < K) { v = in1[bb + gn * K + gk]; }
      Bs[kk * BN + nn] = v;
    }
  workgroupBarrier();
  for (var kk = 0u; kk < BK; kk++) {
    let a0 = As[kk * BM + ty + 0u];
    let a1 = As[kk * BM + ty + 16u];
    let a2 = As[kk * BM + ty + 32u];
    let a3 = As[kk * BM + ty + 48u];
    let b0 = Bs[kk * BN + tx + 0u];
    let b1 = Bs[kk * BN + tx + 16u];
    let b2 = Bs[kk * BN + tx + 32u];
    let b3 = Bs[kk * BN + tx + 48u];
    acc0_0 = acc0_0 + a0 * b0;
    acc0_1 = acc0_1 + a0 * b1;
    acc0_2 = acc0_2 + a0 * b2;
    acc0_3 = acc0_3 + a0 * b3;
    acc1_0 = acc1_0 + a1 * b0;
    acc1_1 = acc1_1 + a1 * b1;
    acc1_2 = acc1_2 + a1 * b2;
    acc1_3 = acc1_3 + a1 * b3;
    acc2_0 = acc2_0 + a2 * b0;
    acc2_1 = acc2_1 + a2 * b1;
    acc2_2 = acc2_2 + a2 * b2;
    acc2_3 = acc2_3 + a2 * b3;
    acc3_0 = acc3_0 + a3 * b0;
    acc3_1 = acc3_1 + a3 * b1;
    acc3_2 = acc3_2 + a3 * b2;
    acc3_3 = acc3_3 + a3 * b3;
  }
    workgroupBarrier();
  }
  let ob = wid.z * M * N;
  let gm0 = m0 + ty + 0u;
  if (gm0 < M && n0 + tx + 0u < N) { out0[ob + gm0 * N + n0 + tx + 0u] = acc0_0; }
  if (gm0 < M && n0 + tx + 16u < N) { out0[ob + gm0 * N + n0 + tx + 16u] = acc0_1; }
  if (gm0 < M && n0 + tx + 32u < N) { out0[ob + gm0 * N + n0 + tx + 32u] = acc0_2; }
  if (gm0 < M && n0 + tx + 48u < N) { out0[ob + gm0 * N + n0 + tx + 48u] = acc0_3; }
  let gm1 = m0 + ty + 16u;
  if (gm1 < M && n0 + tx + 0u < N) { out0[ob + gm1 * N + n0 + tx + 0u] = acc1_0; }
  if (gm1 < M && n0 + tx + 16u < N) { out0[ob + gm1 * N + n0 + tx + 16u] = acc1_1; }
  if (gm1 < M && n0 + tx + 32u < N) { out0[ob + gm1 * N + n0 + tx + 32u] = acc1_2; }
  if (gm1 < M && n0 + tx + 48u < N) { out0[ob + gm1 * N + n0 + tx + 48u] = acc1_3; }
  let gm2 = m0 + ty + 32u;
  if (gm2 < M && n0 + tx + 0u < N) { out0[ob + gm2 * N + n0 + tx + 0u] = acc2_0; }
  if (gm2 < M && n0 + tx + 16u < N) { out0[ob + gm2 * N + n0 + tx + 16u] = acc2_1; }
  if (gm2 < M && n0 + tx + 32u < N) { out0[ob + gm2 * N + n0 + tx + 32u] = acc2_2; }
  if (gm2 < M && n0 + tx + 48u < N) { out0[ob + gm2 * N + n0 + tx + 48u] = acc2_3; }
  let gm3 = m0 + ty + 48u;
  if (gm3 < M && n0 + tx + 0u < N) { out0[ob + gm3 * N + n0 + tx + 0u] = acc3_0; }
  if (gm3 < M && n0 + tx + 16u < N) { out0[ob + gm3 * N + n0 + tx + 16u] = acc3_1; }
  if (gm3 < M && n0 + tx + 32u < N) { out0[ob + gm3 * N + n0 + tx + 32u] = acc3_2; }
  if (gm3 < M && n0 + tx + 48u < N) { out0[ob + gm3 * N + n0 + tx + 48u] = acc3_3; }
}
