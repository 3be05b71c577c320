package spirv

import (
	"fmt"

	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
)

// testCase is one node to generate a kernel for: an op, concrete input
// types and attributes, and how to fill integer inputs (ids, positions)
// when the kernel runs.
type testCase struct {
	name  string
	op    ir.Op
	in    []ir.Type
	attrs ir.Attrs
	// fill, for an input index, gives element i's value (for i32 inputs
	// and for f32 inputs that need a domain, e.g. log's).
	fill map[int]func(i int) float64
	tune wgsl.Tuning // kernel variant
}

func f32(dims ...int64) ir.Type { return ir.T(ir.F32, ir.S(dims...)) }
func i32(dims ...int64) ir.Type { return ir.T(ir.I32, ir.S(dims...)) }

// positive fills an input with values in (0.1, 4).
func positive(i int) float64 { return 0.1 + float64((i*7919)%389)/100 }

func constFill(v float64) func(int) float64 { return func(int) float64 { return v } }

// testCases are the shapes every op is generated for (the validation test)
// and run on (the device test).
func testCases() []testCase {
	var cs []testCase
	add := func(c testCase) {
		if c.name == "" {
			c.name = c.op.String()
		}
		for _, t := range c.in {
			c.name += "_" + t.String()
		}
		cs = append(cs, c)
	}
	for _, op := range ir.UnaryOps {
		var fill map[int]func(int) float64
		switch op {
		case ir.OpLog, ir.OpSqrt, ir.OpRsqrt:
			fill = map[int]func(int) float64{0: positive}
		}
		for _, t := range []ir.Type{f32(7), f32(3, 5, 17), f32(1000)} {
			add(testCase{op: op, in: []ir.Type{t}, fill: fill})
		}
	}
	for _, op := range []ir.Op{ir.OpNeg, ir.OpAbs, ir.OpRelu} {
		add(testCase{name: op.String() + "_int", op: op, in: []ir.Type{i32(9)}})
	}
	for _, op := range ir.BinaryOps {
		var fill map[int]func(int) float64
		if op == ir.OpPow {
			fill = map[int]func(int) float64{0: positive}
		}
		if op == ir.OpDiv {
			fill = map[int]func(int) float64{1: positive}
		}
		for _, in := range [][]ir.Type{
			{f32(4, 5), f32(4, 5)},
			{f32(4, 5), f32(5)},
			{f32(2, 1, 3), f32(4, 1)},
			{f32(3), f32()},
		} {
			add(testCase{op: op, in: in, fill: fill})
		}
	}
	// pow of negative bases with integer exponents.
	add(testCase{name: "pow_int_exp", op: ir.OpPow, in: []ir.Type{f32(6), f32(6)},
		fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i) - 2.5 }, 1: func(i int) float64 { return float64(i%4 - 1) }}})
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpMaximum, ir.OpMinimum} {
		add(testCase{name: op.String() + "_int", op: op, in: []ir.Type{i32(3, 4), i32(4)},
			fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i*37%23 - 11) }, 1: func(i int) float64 { return float64(i*5%7 - 3) }}})
	}
	add(testCase{op: ir.OpFusedElementwise, in: []ir.Type{f32(4, 8), f32(4, 8)}, attrs: ir.Attrs{"expr": ir.StringAttr("mul(silu($0), $1)")}})
	add(testCase{op: ir.OpFusedElementwise, in: []ir.Type{f32(3, 4), f32(4)}, attrs: ir.Attrs{"expr": ir.StringAttr("add(mul($0, 0.5), exp(neg($1)))")}})
	add(testCase{op: ir.OpFusedElementwise, in: []ir.Type{f32(5), f32(5), f32(1)}, attrs: ir.Attrs{"expr": ir.StringAttr("div(maximum($0, $2), add(abs($1), 1.5))")}})

	add(testCase{op: ir.OpConstant, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(3, 2)), "value": ir.FloatsAttr(1, -2, 3.5, 4, 5, 0.25)}})
	add(testCase{op: ir.OpConstant, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(300)), "value": ir.FloatsAttr(0.75)}})
	add(testCase{op: ir.OpConstant, attrs: ir.Attrs{"dtype": ir.DTypeAttr(ir.I32), "shape": ir.ShapeAttr(ir.S(4)), "value": ir.FloatsAttr(1, 2, -3, 7)}})
	add(testCase{op: ir.OpCast, in: []ir.Type{f32(10)}, attrs: ir.Attrs{"to": ir.DTypeAttr(ir.I32)},
		fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i)*1.7 - 8 }}})
	add(testCase{op: ir.OpCast, in: []ir.Type{i32(10)}, attrs: ir.Attrs{"to": ir.DTypeAttr(ir.F32)},
		fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i*i - 30) }}})
	add(testCase{op: ir.OpCast, in: []ir.Type{f32(4)}, attrs: ir.Attrs{"to": ir.DTypeAttr(ir.F32)}})

	ids := func(n int) func(int) float64 { return func(i int) float64 { return float64((i*7 + 3) % n) } }
	add(testCase{op: ir.OpGather, in: []ir.Type{f32(10, 4), i32(3)}, fill: map[int]func(int) float64{1: ids(10)}})
	add(testCase{op: ir.OpGather, in: []ir.Type{f32(2, 5, 3), i32(4)}, attrs: ir.Attrs{"axis": ir.IntAttr(1)}, fill: map[int]func(int) float64{1: ids(5)}})
	add(testCase{op: ir.OpGather, in: []ir.Type{i32(6, 2), i32(2, 2)}, fill: map[int]func(int) float64{1: ids(6)}})

	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	// Weights in storage dtypes: decoded bit for bit (dequantize), and
	// read by gather and every matmul kernel.
	st := func(dt ir.DType, dims ...int64) ir.Type { return ir.T(dt, ir.S(dims...)) }
	for _, dt := range ir.StorageDTypes {
		e, _ := dt.Block()
		add(testCase{op: ir.OpDequantize, in: []ir.Type{st(dt, 3, int64(max(e, 8)))}})
	}
	add(testCase{op: ir.OpGather, in: []ir.Type{st(ir.Q4_0, 10, 64), i32(3)}, fill: map[int]func(int) float64{1: ids(10)}})
	add(testCase{op: ir.OpGather, in: []ir.Type{st(ir.F16, 9, 6), i32(4)}, fill: map[int]func(int) float64{1: ids(9)}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(1, 512), st(ir.Q4_K, 30, 512)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(1, 256), st(ir.Q6_K, 9, 256)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(1, 37), st(ir.F16, 20, 37)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(17, 64), st(ir.Q4_0, 9, 64)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(40, 64), st(ir.Q8_0, 36, 64)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(3, 5), f32(5, 7)}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(1, 64), f32(100, 64)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(17, 33), f32(9, 33)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(2, 3, 4, 5), f32(5, 6)}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(2, 1, 4, 8), f32(3, 8, 5)}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(64, 64), f32(64, 64)}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(3, 33), f32(50, 33)}, attrs: tb})
	// A norm fused into the products that read it (passes/norm.go): vec4
	// and scalar rows, several rows, stored weights.
	add(testCase{op: ir.OpRMSNormMatmul, in: []ir.Type{f32(1, 64), f32(64), f32(100, 64)}})
	add(testCase{op: ir.OpRMSNormMatmul, in: []ir.Type{f32(3, 37), f32(37), f32(20, 37)}})
	add(testCase{op: ir.OpRMSNormMatmul, in: []ir.Type{f32(1, 64), f32(64), st(ir.Q4_0, 9, 64)}})
	add(testCase{op: ir.OpRMSNormMatmul, in: []ir.Type{f32(2, 256), f32(256), st(ir.Q6_K, 5, 256)}})
	// gate and up with silu·mul fused on top (passes/swiglu.go): vec4 and
	// scalar rows, several rows, stored weights of two formats.
	add(testCase{op: ir.OpRMSNormSwiGLU, in: []ir.Type{f32(1, 64), f32(64), f32(100, 64), f32(100, 64)}})
	add(testCase{op: ir.OpRMSNormSwiGLU, in: []ir.Type{f32(3, 37), f32(37), f32(20, 37), f32(20, 37)}})
	add(testCase{op: ir.OpRMSNormSwiGLU, in: []ir.Type{f32(1, 256), f32(256), st(ir.Q4_0, 9, 256), st(ir.Q6_K, 9, 256)}})
	// q, k and v of one norm (passes/qkv.go): segments of unequal width,
	// several rows, stored weights of three formats.
	add(testCase{op: ir.OpRMSNormQKV, in: []ir.Type{f32(1, 64), f32(64), f32(64, 64), f32(32, 64), f32(32, 64)}})
	add(testCase{op: ir.OpRMSNormQKV, in: []ir.Type{f32(3, 37), f32(37), f32(20, 37), f32(5, 37), f32(5, 37)}})
	add(testCase{op: ir.OpRMSNormQKV, in: []ir.Type{f32(1, 256), f32(256), st(ir.Q4_0, 9, 256), st(ir.Q6_K, 4, 256), st(ir.F16, 4, 256)}})
	// A residual add fused in (the addend c, passes/residual.go), in every
	// kernel: GEMV with and without transpose_b (vec4 and scalar), the
	// scalar and vec4 tiles, a stored weight, batch dims.
	for _, in := range [][]ir.Type{
		{f32(1, 64), f32(100, 64), f32(1, 100)}, {f32(1, 64), st(ir.Q4_0, 9, 64), f32(1, 9)},
		{f32(1, 37), f32(37, 20), f32(1, 20)}, {f32(1, 37), f32(37, 19), f32(1, 19)},
		{f32(67, 45), f32(33, 45), f32(67, 33)}, {f32(17, 64), st(ir.Q4_0, 9, 64), f32(17, 9)},
		{f32(64, 64), f32(64, 64), f32(64, 64)}, {f32(2, 1, 4, 8), f32(3, 8, 5), f32(2, 3, 4, 5)},
	} {
		var attrs ir.Attrs
		if in[2].Shape[in[2].Shape.Rank()-1] != in[1].Shape[in[1].Shape.Rank()-1] {
			attrs = tb
		}
		add(testCase{op: ir.OpMatmul, in: in, attrs: attrs})
	}
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(2, 1, 40), f32(2, 7, 40)}, attrs: tb})
	add(testCase{name: "matmul_gemv_lanes1", op: ir.OpMatmul, in: []ir.Type{f32(1, 64), f32(100, 64)}, attrs: tb, tune: wgsl.Tuning{GEMVLanes: 1}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(70, 33), f32(33, 90)}})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(40, 50), f32(70, 50)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(2, 48, 20), f32(20, 40)}})

	add(testCase{op: ir.OpRMSNorm, in: []ir.Type{f32(4, 16), f32(16)}})
	add(testCase{op: ir.OpRMSNorm, in: []ir.Type{f32(3, 300), f32(300)}})
	add(testCase{op: ir.OpRMSNorm, in: []ir.Type{f32(2, 2, 7), f32(7)}, attrs: ir.Attrs{"eps": ir.FloatAttr(1e-6)}})
	add(testCase{op: ir.OpLayerNorm, in: []ir.Type{f32(4, 16), f32(16), f32(16)}})
	add(testCase{op: ir.OpLayerNorm, in: []ir.Type{f32(2, 3, 100), f32(100), f32(100)}})

	add(testCase{op: ir.OpSoftmax, in: []ir.Type{f32(4, 10)}})
	add(testCase{op: ir.OpSoftmax, in: []ir.Type{f32(3, 5, 7)}, attrs: ir.Attrs{"axis": ir.IntAttr(1)}})
	add(testCase{op: ir.OpSoftmax, in: []ir.Type{f32(2, 600)}})
	add(testCase{op: ir.OpArgmax, in: []ir.Type{f32(4, 10)}})
	add(testCase{op: ir.OpArgmax, in: []ir.Type{f32(3, 5, 7)}, attrs: ir.Attrs{"axis": ir.IntAttr(1)}})
	add(testCase{op: ir.OpArgmax, in: []ir.Type{f32(1, 3000)}})
	add(testCase{op: ir.OpArgmax, in: []ir.Type{i32(5, 6)}, fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i * 7 % 5) }}})

	pos := func(p int) map[int]func(int) float64 { return map[int]func(int) float64{1: constFill(float64(p))} }
	add(testCase{op: ir.OpRope, in: []ir.Type{f32(3, 4, 8), i32()}, fill: pos(5)})
	add(testCase{op: ir.OpRope, in: []ir.Type{f32(2, 2, 16), i32()}, attrs: ir.Attrs{"style": ir.StringAttr("half")}, fill: pos(100)})
	add(testCase{op: ir.OpRope, in: []ir.Type{f32(1, 3, 8), i32()}, attrs: ir.Attrs{"dims": ir.IntAttr(4), "theta": ir.FloatAttr(500000)}, fill: pos(1000)})
	add(testCase{op: ir.OpRope, in: []ir.Type{f32(3, 4, 16), i32()}, attrs: ir.Attrs{"theta": ir.FloatAttr(500000),
		"freq_factors": ir.FloatsAttr(1, 1, 1.5, 2, 4, 8, 8, 8)}, fill: pos(200)})
	table := map[int]func(int) float64{1: constFill(14), 2: func(i int) float64 { return 1 / float64(1+i) }}
	add(testCase{name: "rope_table", op: ir.OpRope, in: []ir.Type{f32(3, 4, 16), i32(), f32(5, 8)},
		attrs: ir.Attrs{"style": ir.StringAttr("half"), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)}, fill: table})

	add(testCase{op: ir.OpKVWrite, in: []ir.Type{f32(8, 2, 4), f32(3, 2, 4), i32()}, fill: map[int]func(int) float64{2: constFill(2)}})
	add(testCase{op: ir.OpKVWrite, in: []ir.Type{f32(16, 1, 8), f32(1, 1, 8), i32()}, fill: map[int]func(int) float64{2: constFill(15)}})
	// rope_kv_write (passes/ropekv.go): a decode step's grouped heads at the
	// cache's last row, a partial half-style rotation by a freqs table,
	// several rows with frequency factors.
	ropeKV := func(p int) map[int]func(int) float64 { return map[int]func(int) float64{5: constFill(float64(p))} }
	add(testCase{op: ir.OpRopeKVWrite, in: []ir.Type{f32(16, 2, 8), f32(16, 2, 8), f32(1, 4, 8), f32(1, 2, 8), f32(1, 2, 8), i32()}, fill: ropeKV(15)})
	add(testCase{name: "rope_kv_write_table", op: ir.OpRopeKVWrite, in: []ir.Type{f32(32, 2, 16), f32(32, 2, 16), f32(1, 4, 16), f32(1, 2, 16), f32(1, 2, 16), i32(), f32(5, 4)},
		attrs: ir.Attrs{"style": ir.StringAttr("half"), "dims": ir.IntAttr(8), "original_max": ir.IntAttr(16), "attention_factor": ir.FloatAttr(1.2)},
		fill:  map[int]func(int) float64{5: constFill(17), 6: func(i int) float64 { return 1 / float64(1+i) }}})
	add(testCase{op: ir.OpRopeKVWrite, in: []ir.Type{f32(16, 1, 16), f32(16, 1, 16), f32(3, 2, 16), f32(3, 1, 16), f32(3, 1, 16), i32()},
		attrs: ir.Attrs{"theta": ir.FloatAttr(500000), "freq_factors": ir.FloatsAttr(1, 1, 1.5, 2, 4, 8, 8, 8)}, fill: ropeKV(4)})

	att := func(scale float64, causal bool) ir.Attrs {
		return ir.Attrs{"scale": ir.FloatAttr(scale), "causal": ir.BoolAttr(causal)}
	}
	posAt := func(p int) map[int]func(int) float64 { return map[int]func(int) float64{3: constFill(float64(p))} }
	add(testCase{op: ir.OpAttention, in: []ir.Type{f32(3, 4, 8), f32(10, 2, 8), f32(10, 2, 8), i32()}, attrs: att(0.35, true), fill: posAt(2)})
	add(testCase{name: "attention_noncausal", op: ir.OpAttention, in: []ir.Type{f32(3, 4, 8), f32(10, 2, 8), f32(10, 2, 8), i32()}, attrs: att(0.35, false), fill: posAt(2)})
	add(testCase{op: ir.OpAttention, in: []ir.Type{f32(1, 4, 48), f32(64, 4, 48), f32(64, 4, 48), i32()}, attrs: att(0.144, true), fill: posAt(40)})
	add(testCase{name: "attention_softcap_window", op: ir.OpAttention, in: []ir.Type{f32(3, 4, 8), f32(20, 2, 8), f32(20, 2, 8), i32()},
		attrs: ir.Attrs{"scale": ir.FloatAttr(0.35), "softcap": ir.FloatAttr(0.5), "window": ir.IntAttr(4)}, fill: posAt(9)})
	// The slot kernel's decode shapes: several load steps per key slot,
	// GQA 8, head dims 80 and 128, a scalar head dim wider than a workgroup.
	add(testCase{name: "attention_decode_gqa8", op: ir.OpAttention, in: []ir.Type{f32(1, 16, 64), f32(700, 2, 64), f32(700, 2, 64), i32()}, attrs: att(0.125, true), fill: posAt(650)})
	add(testCase{name: "attention_decode_dh80_softcap_window", op: ir.OpAttention, in: []ir.Type{f32(1, 4, 80), f32(400, 1, 80), f32(400, 1, 80), i32()},
		attrs: ir.Attrs{"scale": ir.FloatAttr(0.11), "softcap": ir.FloatAttr(0.5), "window": ir.IntAttr(300), "causal": ir.BoolAttr(true)}, fill: posAt(390)})
	add(testCase{name: "attention_decode_dh128", op: ir.OpAttention, in: []ir.Type{f32(1, 8, 128), f32(300, 1, 128), f32(300, 1, 128), i32()}, attrs: att(0.088, true), fill: posAt(299)})
	add(testCase{name: "attention_odd_head_dim", op: ir.OpAttention, in: []ir.Type{f32(2, 2, 1030), f32(50, 1, 1030), f32(50, 1, 1030), i32()}, attrs: att(0.03, true), fill: posAt(10)})
	add(testCase{name: "attention_chunked", op: ir.OpAttention, in: []ir.Type{f32(2, 2, 8), f32(2100, 1, 8), f32(2100, 1, 8), i32()}, attrs: att(0.35, true), fill: posAt(2098)})

	add(testCase{op: ir.OpReshape, in: []ir.Type{f32(3, 4)}, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(12))}})
	add(testCase{op: ir.OpReshape, in: []ir.Type{i32(2, 3, 4)}, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, -1))}})
	add(testCase{op: ir.OpTranspose, in: []ir.Type{f32(3, 4)}, attrs: ir.Attrs{"perm": ir.IntsAttr(1, 0)}})
	add(testCase{op: ir.OpTranspose, in: []ir.Type{f32(2, 3, 4)}, attrs: ir.Attrs{"perm": ir.IntsAttr(2, 0, 1)}})
	add(testCase{op: ir.OpSlice, in: []ir.Type{f32(10, 4)}, attrs: ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(2), "end": ir.IntAttr(8), "step": ir.IntAttr(2)}})
	add(testCase{op: ir.OpSlice, in: []ir.Type{f32(3, 5, 6)}, attrs: ir.Attrs{"axis": ir.IntAttr(-1), "start": ir.IntAttr(-3), "end": ir.IntAttr(100)}})
	// compare and where: booleans are i32 0/1; every comparison, with
	// broadcasting, on f32 and i32; where on both element types.
	for _, cmp := range ir.Comparisons {
		add(testCase{name: "compare_" + cmp, op: ir.OpCompare, in: []ir.Type{f32(3, 4), f32(4)}, attrs: ir.Attrs{"cmp": ir.StringAttr(cmp)},
			fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i%5 - 2) }, 1: func(i int) float64 { return float64(i%3 - 1) }}})
	}
	add(testCase{name: "compare_int", op: ir.OpCompare, in: []ir.Type{i32(6), i32(6)}, attrs: ir.Attrs{"cmp": ir.StringAttr("le")},
		fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i % 3) }, 1: func(i int) float64 { return float64(i % 2) }}})
	add(testCase{op: ir.OpWhere, in: []ir.Type{i32(3, 1), f32(3, 4), f32(4)}, fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i % 2) }}})
	add(testCase{name: "where_int", op: ir.OpWhere, in: []ir.Type{i32(5), i32(5), i32()}, fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i % 3) }}})
	add(testCase{op: ir.OpConcat, in: []ir.Type{f32(2, 3), f32(2, 5)}, attrs: ir.Attrs{"axis": ir.IntAttr(1)}})
	add(testCase{op: ir.OpConcat, in: []ir.Type{f32(1, 4), f32(2, 4), f32(3, 4)}, attrs: ir.Attrs{"axis": ir.IntAttr(0)}})
	add(testCase{op: ir.OpProbe, in: []ir.Type{f32(5, 3)}, attrs: ir.Attrs{"tag": ir.StringAttr("x")}})
	add(testCase{op: ir.OpTransfer, in: []ir.Type{f32(5, 3)}, attrs: ir.Attrs{"from": ir.StringAttr("source"), "to": ir.StringAttr("target")}})
	nnCases(add)
	llmCases(add)
	// Tiled products the K-sliced tunings take (last: the cases before
	// keep their random inputs): stored f16, Q4_K and Q4_0 (with the
	// addend), batch dims, K over several slices' steps.
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(33, 512), st(ir.Q4_K, 20, 512)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(2, 19, 72), st(ir.F16, 12, 72)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(21, 100), f32(8, 100)}, attrs: tb})
	add(testCase{op: ir.OpMatmul, in: []ir.Type{f32(24, 96), st(ir.Q4_0, 20, 96), f32(24, 20)}, attrs: tb})
	return cs
}

// llmCases adds the cases of the mixture-of-experts and recurrent ops.
func llmCases(add func(testCase)) {
	neg := func(i int) float64 { return -positive(i) } // decays: RWKV's w, Mamba's A
	add(testCase{op: ir.OpTopK, in: []ir.Type{f32(5, 8)}, attrs: ir.Attrs{"k": ir.IntAttr(2)}})
	add(testCase{name: "topk_ties", op: ir.OpTopK, in: []ir.Type{f32(3, 4, 2)}, attrs: ir.Attrs{"k": ir.IntAttr(3), "axis": ir.IntAttr(1)},
		fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i % 3) }}})
	experts := map[int]func(int) float64{2: func(i int) float64 { return float64((i*5 + 1) % 4) }}
	add(testCase{op: ir.OpExpertMatmul, in: []ir.Type{f32(3, 64), f32(4, 40, 64), i32(3, 2)}, fill: experts})
	add(testCase{op: ir.OpExpertMatmul, in: []ir.Type{f32(2, 2, 37), f32(4, 5, 37), i32(2, 2)}, fill: experts})
	add(testCase{op: ir.OpTokenShift, in: []ir.Type{f32(5, 16), f32(1, 16)}})
	add(testCase{op: ir.OpCausalConv1D, in: []ir.Type{f32(3, 24), f32(7, 24), f32(24, 4)}})
	add(testCase{op: ir.OpCausalConv1D, in: []ir.Type{f32(3, 24), f32(1, 24), f32(24, 4)}})
	add(testCase{op: ir.OpWKV, in: []ir.Type{f32(3, 16), f32(6, 16), f32(6, 16), f32(16), f32(16)},
		fill: map[int]func(int) float64{0: func(i int) float64 { return float64(i%7) * 0.5 }, 3: neg}})
	add(testCase{op: ir.OpSelectiveScan, in: []ir.Type{f32(16, 8), f32(5, 16), f32(5, 16), f32(16, 8), f32(5, 8), f32(5, 8)},
		fill: map[int]func(int) float64{2: positive, 3: neg}})
}

// nnCases adds the cases of the vision and general ONNX ops, when the
// registry has them.
func nnCases(add func(testCase)) {
	has := func(op ir.Op) bool { return ir.LookupOp(op) != nil }
	ints := ir.IntsAttr
	if has(ir.OpIota) {
		start := map[int]func(int) float64{0: constFill(5)}
		add(testCase{op: ir.OpIota, in: []ir.Type{i32()}, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(4, 3)), "axis": ir.IntAttr(1)}, fill: start})
		add(testCase{op: ir.OpIota, in: []ir.Type{i32()}, attrs: ir.Attrs{"shape": ir.ShapeAttr(ir.S(6))}, fill: start})
	}
	if has(ir.OpConv2D) {
		add(testCase{op: ir.OpConv2D, in: []ir.Type{f32(1, 3, 8, 8), f32(4, 3, 3, 3), f32(4)}, attrs: ir.Attrs{"pads": ints(1, 1, 1, 1)}})
		add(testCase{op: ir.OpConv2D, in: []ir.Type{f32(2, 3, 9, 7), f32(5, 3, 3, 2)}, attrs: ir.Attrs{"strides": ints(2, 1), "pads": ints(1, 0, 2, 1)}})
		add(testCase{op: ir.OpConv2D, in: []ir.Type{f32(2, 4, 7, 7), f32(4, 2, 3, 3)}, attrs: ir.Attrs{"groups": ir.IntAttr(2), "dilations": ints(2, 2)}})
	}
	if has(ir.OpConvTranspose2D) {
		add(testCase{op: ir.OpConvTranspose2D, in: []ir.Type{f32(1, 2, 4, 4), f32(2, 3, 3, 3), f32(3)},
			attrs: ir.Attrs{"strides": ints(2, 2), "pads": ints(1, 1, 1, 1), "output_padding": ints(1, 1)}})
		add(testCase{op: ir.OpConvTranspose2D, in: []ir.Type{f32(1, 4, 3, 3), f32(4, 1, 2, 2)}, attrs: ir.Attrs{"groups": ir.IntAttr(2), "dilations": ints(2, 2)}})
	}
	if has(ir.OpPool2D) {
		add(testCase{op: ir.OpPool2D, in: []ir.Type{f32(1, 2, 7, 7)}, attrs: ir.Attrs{"kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}})
		add(testCase{name: "pool2d_avg", op: ir.OpPool2D, in: []ir.Type{f32(2, 2, 7, 6)}, attrs: ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1)}})
		add(testCase{name: "pool2d_avg_incl_ceil", op: ir.OpPool2D, in: []ir.Type{f32(1, 3, 8, 8)}, attrs: ir.Attrs{"mode": ir.StringAttr("avg"), "kernel": ints(3, 3), "strides": ints(2, 2), "pads": ints(1, 1, 1, 1), "count_include_pad": ir.BoolAttr(true), "ceil_mode": ir.BoolAttr(true)}})
		add(testCase{name: "pool2d_dilated", op: ir.OpPool2D, in: []ir.Type{f32(1, 1, 9, 9)}, attrs: ir.Attrs{"kernel": ints(2, 2), "dilations": ints(2, 3)}})
	}
	if has(ir.OpResize) {
		add(testCase{op: ir.OpResize, in: []ir.Type{f32(1, 2, 3, 4)}, attrs: ir.Attrs{"size": ints(6, 8)}})
		add(testCase{name: "resize_linear", op: ir.OpResize, in: []ir.Type{f32(1, 1, 4, 4)}, attrs: ir.Attrs{"size": ints(7, 5), "mode": ir.StringAttr("linear")}})
		add(testCase{name: "resize_align", op: ir.OpResize, in: []ir.Type{f32(2, 1, 3, 5)}, attrs: ir.Attrs{"size": ints(5, 9), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners")}})
		// With scales, align_corners divides by in·scale (7.5 here), not the output size.
		add(testCase{name: "resize_align_scales", op: ir.OpResize, in: []ir.Type{f32(1, 2, 5, 5)}, attrs: ir.Attrs{"size": ints(7, 3), "mode": ir.StringAttr("linear"), "coord": ir.StringAttr("align_corners"), "scales": ir.FloatsAttr(1.5, 0.7)}})
		add(testCase{name: "resize_asym", op: ir.OpResize, in: []ir.Type{f32(1, 1, 4, 6)}, attrs: ir.Attrs{"size": ints(8, 3), "coord": ir.StringAttr("asymmetric"), "nearest": ir.StringAttr("floor"), "scales": ir.FloatsAttr(2, 0.5)}})
	}
	if has(ir.OpReduceSum) {
		add(testCase{op: ir.OpReduceSum, in: []ir.Type{f32(2, 3, 4)}, attrs: ir.Attrs{"axes": ints(1)}})
		add(testCase{op: ir.OpReduceMean, in: []ir.Type{f32(2, 3, 4)}, attrs: ir.Attrs{"axes": ints(0, 2), "keepdims": ir.BoolAttr(false)}})
		add(testCase{op: ir.OpReduceMax, in: []ir.Type{f32(3, 50)}, attrs: ir.Attrs{"axes": ints(-1)}})
		add(testCase{op: ir.OpReduceSum, in: []ir.Type{f32(1, 64, 7, 7)}, attrs: ir.Attrs{"axes": ints(2, 3)}})
	}
}

// node builds the IR node of a test case.
func (c testCase) node() *ir.Node {
	return &ir.Node{ID: 1, Op: c.op, Attrs: c.attrs}
}

func (c testCase) String() string { return fmt.Sprintf("%s(%v)", c.op, c.in) }
