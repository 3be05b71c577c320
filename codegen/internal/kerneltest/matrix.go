package kerneltest

// MatrixKernel uses subgroup matrices (`enable
// chromium_experimental_subgroup_matrix;`) as a matmul kernel would: one
// 16x16x16 product of f16 fragments staged in workgroup memory into an f32
// accumulator, the left operand row-major and the right column-major
// (written &(tb), as Dawn does; its tile an array of vec4<f16>, staged a
// vector per store), stored back to workgroup memory. in0
// holds A (16 x 32 halves, row-major, stride 32) then B (32 halves per
// column, the product reads rows 16 to 31); out0 gets C = A[:, 0:16] x
// B[16:32, :], 16 x 16 row-major.
const MatrixKernel = `enable f16;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;
var<workgroup> ta: array<f16, 512>;
var<workgroup> tb: array<vec4<f16>, 128>;
var<workgroup> tc: array<f32, 256>;
@compute @workgroup_size(32, 1, 1)
fn main(@builtin(local_invocation_index) li: u32) {
  for (var i = li; i < 128u; i += 32u) {
    let x = in0[i];
    let y = in0[128u + i];
    ta[4u * i] = f16(x.x); ta[4u * i + 1u] = f16(x.y); ta[4u * i + 2u] = f16(x.z); ta[4u * i + 3u] = f16(x.w);
    tb[i] = vec4<f16>(f16(y.x), f16(y.y), f16(y.z), f16(y.w));
  }
  workgroupBarrier();
  var acc = subgroup_matrix_result<f32, 16, 16>();
  let a = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ta, 0u, false, 32u);
  let b = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&(tb), 4u, true, 8u);
  acc = subgroupMatrixMultiplyAccumulate(a, b, acc);
  subgroupMatrixStore(&tc, 0u, acc, false, 16u);
  workgroupBarrier();
  for (var j = li; j < 256u; j += 32u) {
    out0[j] = tc[j];
  }
}
`

// MatrixLoopKernel multiplies straight from storage buffers: each
// workgroup (one subgroup of 32) computes a 32 x 32 block of C = A x B as
// 2 x 2 fragments of 16 x 16, looping over K in steps of 16. A is M x 64
// and B 64 x 32, f16 row-major; C is M x 32, f32 row-major. One
// accumulator is declared without initializer (zero) and one is f16.
const MatrixLoopKernel = `enable f16;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<storage, read_write> c16: array<f16>;
const K: u32 = 64u;
const N: u32 = 32u;
@compute @workgroup_size(32, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>) {
  let row = wid.x * 32u;
  var c00: subgroup_matrix_result<f32, 16, 16>;
  var c01 = subgroup_matrix_result<f32, 16, 16>();
  var c10 = subgroup_matrix_result<f32, 16, 16>();
  var c11 = subgroup_matrix_result<f16, 16, 16>();
  for (var k = 0u; k < K; k += 16u) {
    let a0 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&a, row * K + k, false, K);
    let a1 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&a, (row + 16u) * K + k, false, K);
    let b0 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&b, k * N, false, N);
    let b1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&b, k * N + 16u, false, N);
    c00 = subgroupMatrixMultiplyAccumulate(a0, b0, c00);
    c01 = subgroupMatrixMultiplyAccumulate(a0, b1, c01);
    c10 = subgroupMatrixMultiplyAccumulate(a1, b0, c10);
    c11 = subgroupMatrixMultiplyAccumulate(a1, b1, c11);
  }
  subgroupMatrixStore(&c, row * N, c00, false, N);
  subgroupMatrixStore(&c, row * N + 16u, c01, false, N);
  subgroupMatrixStore(&c, (row + 16u) * N, c10, false, N);
  subgroupMatrixStore(&c16, (row + 16u) * N + 16u, c11, false, N);
}
`

// MatrixScaleKernel divides a product's columns by scales, as the
// subgroup-matrix matmul over scaled block formats does: C = (A x B) / S
// + A x B·0.5, where S repeats one row of 16 values (loaded with stride 0).
// in0 holds A (16 x 16 halves, row-major) and B (16 x 16, column-major);
// in1 the 16 column divisors; out0 gets C, 16 x 16 row-major.
const MatrixScaleKernel = `enable f16;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> in0: array<f16>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;
@compute @workgroup_size(32, 1, 1)
fn main(@builtin(local_invocation_index) li: u32) {
  let a = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&in0, 0u, false, 16u);
  let b = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&in0, 256u, true, 16u);
  let p = subgroupMatrixMultiplyAccumulate(a, b, subgroup_matrix_result<f32, 16, 16>());
  let s = subgroupMatrixLoad<subgroup_matrix_result<f32, 16, 16>>(&in1, 0u, false, 0u);
  var c = p / s;
  c = c + p * 0.5f;
  c = c - subgroup_matrix_result<f32, 16, 16>();
  subgroupMatrixStore(&out0, 0u, c, false, 16u);
}
`
