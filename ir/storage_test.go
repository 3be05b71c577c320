package ir

import "testing"

// TestStorageFacts: which inputs read storage dtypes, call by call; every
// op not listed reads none.
func TestStorageFacts(t *testing.T) {
	f32 := func(s ...int64) Type { return T(F32, S(s...)) }
	stored := map[Op]bool{OpMatmul: true, OpGather: true, OpDequantize: true, OpRMSNormMatmul: true, OpRMSNormSwiGLU: true, OpRMSNormQKV: true}
	tests := []struct {
		op    Op
		in    []Type
		attrs Attrs
		want  string
	}{
		{OpMatmul, []Type{f32(1, 32), T(Q4_0, S(8, 32))}, Attrs{"transpose_b": BoolAttr(true)}, "input 1: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k"},
		{OpMatmul, []Type{f32(1, 32), f32(32, 8)}, Attrs{"transpose_b": BoolAttr(false)}, "-"},
		{OpMatmul, []Type{T(F16, S(1, 32)), T(F16, S(8, 32))}, Attrs{"transpose_b": BoolAttr(true)}, "-"},
		{OpGather, []Type{T(Q8_0, S(16, 32)), T(I32, S(3))}, Attrs{"axis": IntAttr(0)}, "input 0: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k"},
		{OpGather, []Type{T(Q8_0, S(16, 32)), T(I32, S(3))}, Attrs{"axis": IntAttr(-1)}, "-"},
		{OpDequantize, []Type{T(Q6_K, S(2, 256))}, nil, "input 0: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k"},
		{OpRMSNormMatmul, []Type{f32(1, 32), f32(32), T(Q4_0, S(8, 32))}, nil, "input 2: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k"},
		{OpRMSNormSwiGLU, []Type{f32(1, 32), f32(32), T(Q4_0, S(8, 32)), T(F16, S(8, 32))}, nil, "inputs 2, 3: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k"},
		{OpRMSNormQKV, []Type{f32(1, 32), f32(32), T(Q4_0, S(8, 32)), T(F16, S(4, 32)), T(Q8_0, S(4, 32))}, nil, "inputs 2, 3, 4: f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k"},
	}
	for _, tc := range tests {
		if got := LookupOp(tc.op).Storage.Of(Call{In: tc.in, Attrs: tc.attrs}).String(); got != tc.want {
			t.Errorf("%s%v %v: storage %q, want %q", tc.op, tc.in, tc.attrs, got, tc.want)
		}
	}
	for _, d := range Ops() {
		if !stored[d.Op] && d.Storage.Doc != "-" {
			t.Errorf("%s reads storage dtypes (%s); the list here and the kernels must know", d.Name, d.Storage.Doc)
		}
	}
}

func TestDTypeBytes(t *testing.T) {
	tests := []struct {
		dt   DType
		n    int64
		want int64
	}{
		{F32, 3, 12}, {BF16, 3, 6}, {Bool, 0, 0}, {F32, -1, -1},
		{Q4_0, 64, 36}, {Q8_0, 32, 34}, {Q4_K, 512, 288}, {Q6_K, 256, 210},
		{Q4_0, 33, -1}, {Q2_K, 128, -1},
	}
	for _, tc := range tests {
		if got := tc.dt.Bytes(tc.n); got != tc.want {
			t.Errorf("%s.Bytes(%d) = %d, want %d", tc.dt, tc.n, got, tc.want)
		}
	}
	if got := T(Q5_K, S(3, 512)).Bytes(); got != 3*2*176 {
		t.Errorf("q5_k[3, 512] is %d bytes, want %d", got, 3*2*176)
	}
	for _, dt := range BlockDTypes {
		if !dt.IsBlock() || dt.IsFloat() || dt.Size() != 0 {
			t.Errorf("%s: block %v float %v size %d", dt, dt.IsBlock(), dt.IsFloat(), dt.Size())
		}
		if got, err := ParseDType(dt.String()); err != nil || got != dt {
			t.Errorf("ParseDType(%q) = %s, %v", dt, got, err)
		}
	}
}
