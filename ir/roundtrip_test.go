package ir

import (
	"math"
	"os"
	"strings"
	"testing"
)

// opCtx holds the values the op cases build on, in func @prefill of the
// all-ops module (D 8, heads 2 of 4, one kv head, cache 16 rows).
type opCtx struct {
	b      *Builder
	tokens *Value // i32[seq]
	pos    *Value // i32[]
	cache  *Value // f32[16, 1, 4], a parameter
	emb    *Value // @"a/b:0" f32[16, 8]
	w      *Value // @layers.0.wq f32[8, 8]
	row    *Value // @"norm w" f32[8]
	bias   *Value // @bias f32[8]
	freqs  *Value // @"rope freqs" f32[3, 1]
	q40    *Value // @wq.q4_0 q4_0[4, 32]: a weight in a block format
	q8emb  *Value // @emb.q8_0 q8_0[16, 32]
	half   *Value // @wk.f16 f16[4, 8]
	x      *Value // f32[seq, 8]
	q      *Value // f32[seq, 2, 4]
	k      *Value // f32[seq, 1, 4]
}

// opCases builds, for each registered op, at least one node that sets every
// attribute of the op to a value other than its default. A newly registered
// op fails TestOpCasesCoverRegistry until it has a row here.
var opCases = map[Op]func(c *opCtx){
	OpConstant: func(c *opCtx) {
		c.b.Op(OpConstant, nil, Attrs{"dtype": DTypeAttr(F16), "shape": ShapeAttr(S(2, 3)),
			"value": FloatsAttr(math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1), 5e-324, math.MaxFloat64)})
		c.b.Op(OpConstant, nil, Attrs{"dtype": DTypeAttr(I64), "value": FloatsAttr(-7)})
	},
	OpCast: func(c *opCtx) { c.b.Op(OpCast, []*Value{c.x}, Attrs{"to": DTypeAttr(BF16)}) },
	OpGather: func(c *opCtx) {
		c.b.Op(OpGather, []*Value{c.emb, c.tokens}, Attrs{"axis": IntAttr(1)})
	},
	OpDequantize: func(c *opCtx) { c.b.Op(OpDequantize, []*Value{c.q40}, nil) },
	OpMatmul: func(c *opCtx) {
		c.b.Op(OpMatmul, []*Value{c.x, c.w}, Attrs{"transpose_b": BoolAttr(true)})
		c.b.Op(OpMatmul, []*Value{c.x, c.half}, Attrs{"transpose_b": BoolAttr(true)})
		rows := c.b.Op(OpGather, []*Value{c.q8emb, c.tokens}, nil)
		c.b.Op(OpMatmul, []*Value{rows, c.q40}, Attrs{"transpose_b": BoolAttr(true)})
		c.b.Op(OpMatmul, []*Value{c.q, c.b.Op(OpTranspose, []*Value{c.q}, Attrs{"perm": IntsAttr(0, 2, 1)})}, nil)
	},
	OpRMSNorm: func(c *opCtx) {
		c.b.Op(OpRMSNorm, []*Value{c.x, c.row}, Attrs{"eps": FloatAttr(1e-300)})
	},
	OpRMSNormMatmul: func(c *opCtx) {
		c.b.Op(OpRMSNormMatmul, []*Value{c.x, c.row, c.w}, Attrs{"eps": FloatAttr(1e-6)})
		c.b.Op(OpRMSNormMatmul, []*Value{c.x, c.row, c.half}, nil)
	},
	OpRMSNormSwiGLU: func(c *opCtx) {
		c.b.Op(OpRMSNormSwiGLU, []*Value{c.x, c.row, c.w, c.w}, Attrs{"eps": FloatAttr(1e-6)})
	},
	OpRMSNormQKV: func(c *opCtx) {
		c.b.Op(OpRMSNormQKV, []*Value{c.x, c.row, c.w, c.half, c.w}, Attrs{"eps": FloatAttr(1e-6)})
	},
	OpLayerNorm: func(c *opCtx) {
		c.b.Op(OpLayerNorm, []*Value{c.x, c.row, c.bias}, Attrs{"eps": FloatAttr(0.25)})
	},
	OpSoftmax: func(c *opCtx) { c.b.Op(OpSoftmax, []*Value{c.x}, Attrs{"axis": IntAttr(0)}) },
	OpArgmax:  func(c *opCtx) { c.b.Op(OpArgmax, []*Value{c.x}, Attrs{"axis": IntAttr(-2)}) },
	OpRope: func(c *opCtx) {
		c.b.Op(OpRope, []*Value{c.q, c.pos}, Attrs{"theta": FloatAttr(500000.5), "style": StringAttr("half"), "dims": IntAttr(2),
			"freq_factors": FloatsAttr(2.5), "attention_factor": FloatAttr(1.25)})
		c.b.Op(OpRope, []*Value{c.q, c.pos, c.freqs}, Attrs{"dims": IntAttr(2), "original_max": IntAttr(16)})
	},
	OpKVWrite: func(c *opCtx) { c.b.Op(OpKVWrite, []*Value{c.cache, c.k, c.pos}, nil) },
	OpRopeKVWrite: func(c *opCtx) {
		c.b.Op(OpRopeKVWrite, []*Value{c.cache, c.cache, c.q, c.k, c.k, c.pos}, Attrs{"theta": FloatAttr(500000.5), "style": StringAttr("half"),
			"dims": IntAttr(2), "freq_factors": FloatsAttr(2.5), "attention_factor": FloatAttr(1.25)})
		c.b.Op(OpRopeKVWrite, []*Value{c.cache, c.cache, c.q, c.k, c.k, c.pos, c.freqs}, Attrs{"dims": IntAttr(2), "original_max": IntAttr(16)})
	},
	OpAttention: func(c *opCtx) {
		kc := c.b.Op(OpKVWrite, []*Value{c.cache, c.k, c.pos}, nil)
		c.b.Op(OpAttention, []*Value{c.q, kc, kc, c.pos}, Attrs{"scale": FloatAttr(0.5), "causal": BoolAttr(false)})
		c.b.Op(OpAttention, []*Value{c.q, kc, kc, c.pos}, Attrs{"scale": FloatAttr(0.5), "softcap": FloatAttr(50), "window": IntAttr(3)})
	},
	OpReshape: func(c *opCtx) {
		c.b.Op(OpReshape, []*Value{c.x}, Attrs{"shape": ShapeAttr(Shape{Sym("seq"), D(2), D(-1)})})
	},
	OpTranspose: func(c *opCtx) { c.b.Op(OpTranspose, []*Value{c.q}, Attrs{"perm": IntsAttr(1, 0, 2)}) },
	OpSlice: func(c *opCtx) {
		c.b.Op(OpSlice, []*Value{c.q}, Attrs{"axis": IntAttr(0), "start": IntAttr(-1), "end": IntAttr(math.MaxInt32)})
		c.b.Op(OpSlice, []*Value{c.q}, Attrs{"axis": IntAttr(-1), "start": IntAttr(1), "end": IntAttr(math.MinInt64), "step": IntAttr(math.MaxInt64)})
		c.b.Op(OpSlice, []*Value{c.q}, Attrs{"axis": IntAttr(2), "start": IntAttr(1), "end": IntAttr(-1), "step": IntAttr(2)})
	},
	OpConcat: func(c *opCtx) {
		c.b.Op(OpConcat, []*Value{c.x, c.x, c.x}, Attrs{"axis": IntAttr(-1)})
	},
	OpProbe: func(c *opCtx) {
		c.b.Op(OpProbe, []*Value{c.x}, Attrs{"tag": StringAttr("layer \"0\"\n\tq·k ✓ \x00\\ \xff")})
	},
	OpTransfer: func(c *opCtx) {
		c.b.Op(OpTransfer, []*Value{c.x}, Attrs{"from": StringAttr("source"), "to": StringAttr(`target "gpu:0"`)})
		c.b.F.Nodes[len(c.b.F.Nodes)-1].Place = "target"
	},
	OpTopK: func(c *opCtx) { c.b.OpN(OpTopK, []*Value{c.x}, Attrs{"k": IntAttr(3), "axis": IntAttr(1)}) },
	OpExpertMatmul: func(c *opCtx) {
		ids := c.b.OpN(OpTopK, []*Value{c.x}, Attrs{"k": IntAttr(2)})[1]
		w := c.b.Reshape(c.w, Shape{D(2), D(4), D(8)})
		c.b.Op(OpExpertMatmul, []*Value{c.x, w, ids}, nil)
	},
	OpTokenShift: func(c *opCtx) {
		c.b.Op(OpTokenShift, []*Value{c.x, c.b.Op(OpSlice, []*Value{c.x}, Attrs{"axis": IntAttr(0), "start": IntAttr(-1), "end": IntAttr(math.MaxInt32)})}, nil)
	},
	OpCausalConv1D: func(c *opCtx) {
		st := c.b.Op(OpSlice, []*Value{c.w}, Attrs{"axis": IntAttr(0), "start": IntAttr(0), "end": IntAttr(3)})
		w := c.b.Op(OpTranspose, []*Value{c.b.Op(OpSlice, []*Value{c.w}, Attrs{"axis": IntAttr(0), "start": IntAttr(4), "end": IntAttr(8)})}, Attrs{"perm": IntsAttr(1, 0)})
		c.b.OpN(OpCausalConv1D, []*Value{st, c.x, w}, nil)
	},
	OpWKV: func(c *opCtx) {
		st := c.b.Op(OpSlice, []*Value{c.w}, Attrs{"axis": IntAttr(0), "start": IntAttr(0), "end": IntAttr(3)})
		c.b.OpN(OpWKV, []*Value{st, c.x, c.x, c.row, c.bias}, nil)
	},
	OpSelectiveScan: func(c *opCtx) {
		a := c.b.Op(OpSlice, []*Value{c.w}, Attrs{"axis": IntAttr(1), "start": IntAttr(0), "end": IntAttr(4)})
		bc := c.b.Op(OpSlice, []*Value{c.x}, Attrs{"axis": IntAttr(1), "start": IntAttr(0), "end": IntAttr(4)})
		c.b.OpN(OpSelectiveScan, []*Value{a, c.x, c.x, a, bc, bc}, nil)
	},
	OpFusedElementwise: func(c *opCtx) {
		c.b.Op(OpFusedElementwise, []*Value{c.x, c.row}, Attrs{"expr": StringAttr("add(mul(silu($0), $1), -0.5)")})
	},
}

func init() {
	for _, name := range UnaryOps {
		opCases[name] = func(c *opCtx) { c.b.Unary(name, c.x) }
	}
	for _, name := range BinaryOps {
		opCases[name] = func(c *opCtx) { c.b.Op(name, []*Value{c.x, c.row}, nil) }
	}
}

// allOpsModule builds a module that uses every registered op (as far as
// opCases has rows), with odd names, metadata, provenance and placements.
func allOpsModule(t testing.TB) *Module {
	t.Helper()
	m := NewModule(`all "ops" ✓`)
	m.Meta["source"] = "testdata/none.bin"
	m.Meta[`quote"key`] = "line1\nline2\t☃"
	m.Meta[""] = ""
	c := &opCtx{}
	c.emb = m.AddWeight("a/b:0", T(F32, S(16, 8)), nil)
	c.w = m.AddWeight("layers.0.wq", T(F32, S(8, 8)), nil)
	c.row = m.AddWeight("norm w", T(F32, S(8)), nil)
	c.bias = m.AddWeight("bias", T(F32, S(8)), nil)
	c.freqs = m.AddWeight("rope freqs", T(F32, S(3, 1)), nil)
	m.AddWeight("scalar", T(BF16, Shape{}), nil)
	c.q40 = m.AddWeight("wq.q4_0", T(Q4_0, S(4, 32)), nil)
	c.q8emb = m.AddWeight("emb.q8_0", T(Q8_0, S(16, 32)), nil)
	c.half = m.AddWeight("wk.f16", T(F16, S(4, 8)), nil)

	b := NewFunction(m, "prefill")
	c.b = b
	c.tokens = b.Param("tokens", T(I32, Shape{Sym("seq")}))
	c.pos = b.Param("pos", T(I32, Shape{}))
	c.cache = b.Param("k cache", T(F32, S(16, 1, 4)))
	c.x = b.At("embed").Op(OpGather, []*Value{c.emb, c.tokens}, nil)
	c.q = b.At(`q "3d"`).Reshape(c.x, Shape{Sym("seq"), D(2), D(4)})
	c.k = b.At("k").Op(OpSlice, []*Value{c.q}, Attrs{"axis": IntAttr(1), "start": IntAttr(0), "end": IntAttr(1)})
	b.F.Nodes[len(b.F.Nodes)-1].Place = "source"
	for _, d := range Ops() {
		if f := opCases[d.Op]; f != nil {
			b.At("ops." + d.Name)
			f(c)
		}
	}
	last := b.F.Nodes[len(b.F.Nodes)-1].Output()
	b.Return(last, c.x)
	if b.Err() != nil {
		t.Fatal(b.Err())
	}

	// decode: a static batch dim and a second symbol with a dot.
	d := NewFunction(m, "decode")
	x := d.Param("x", T(F32, Shape{D(1), Sym("batch.n"), D(8)}))
	y := d.At("").Op(OpRMSNorm, []*Value{x, c.row}, nil)
	y = d.Op(OpMatmul, []*Value{y, c.w}, Attrs{"transpose_b": BoolAttr(true)})
	y = d.At("a\\b\"c").Op(OpAdd, []*Value{y, x}, nil)
	d.Return(y)
	if d.Err() != nil {
		t.Fatal(d.Err())
	}

	// A function with a quoted name, no nodes, that returns a weight and
	// a parameter with a quoted name.
	e := NewFunction(m, "weird name/√")
	p := e.Param("a b", T(Bool, S(0, 2)))
	e.Return(c.emb, p)

	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpCasesCoverRegistry(t *testing.T) {
	for _, d := range Ops() {
		if opCases[d.Op] == nil {
			t.Errorf("op %s has no row in opCases (roundtrip_test.go): add one that sets each attribute to a non-default value", d.Name)
		}
	}
	for name := range opCases {
		if LookupOp(name) == nil {
			t.Errorf("opCases has a row for %s, which is not registered", name)
		}
	}
}

// TestAllOpsModuleCoverage checks that the all-ops module uses every op and
// gives every attribute of every op a non-default value somewhere, so the
// round trip covers each attribute kind.
func TestAllOpsModuleCoverage(t *testing.T) {
	m := allOpsModule(t)
	used := map[Op]bool{}
	nonDefault := map[string]bool{}
	kinds := map[AttrKind]bool{}
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			used[n.Op] = true
			for _, spec := range n.Def().Attrs {
				a := n.Attrs[spec.Name]
				kinds[a.Kind] = true
				if spec.Default == nil || !a.Equal(*spec.Default) {
					nonDefault[n.Op.String()+"."+spec.Name] = true
				}
			}
		}
	}
	for _, d := range Ops() {
		if !used[d.Op] {
			t.Errorf("op %s is not used by the all-ops module", d.Name)
		}
		for _, spec := range d.Attrs {
			if !nonDefault[d.Name+"."+spec.Name] {
				t.Errorf("attribute %s.%s never has a non-default value", d.Name, spec.Name)
			}
		}
	}
	for k := range attrKindNames {
		if !kinds[k] {
			t.Errorf("attribute kind %s is not used", k)
		}
	}
}

func TestAllOpsRoundTrip(t *testing.T) {
	m := allOpsModule(t)
	golden(t, "all_ops.tir", Text(m))
	m2 := roundTrip(t, m)
	// The parsed module continues numbering after the largest id.
	if id, want := m2.NewID(), m.NewID(); id != want {
		t.Errorf("NewID after parse = %d, want %d", id, want)
	}
	// A clone is structurally equal and independent.
	c := m.Clone()
	if d := diffModules(m, c); d != "" {
		t.Fatalf("clone differs:\n%s", d)
	}
	c.Funcs[0].Nodes[0].Attrs["axis"] = IntAttr(1)
	c.Funcs[0].Nodes[0].Outputs[0].Type.Shape[0] = D(3)
	c.AddWeight("extra", T(F32, S(1)), nil)
	if d := diffModules(m, c); !strings.Contains(d, "axis") || !strings.Contains(d, "extra") {
		t.Errorf("diffModules misses changes:\n%s", d)
	}
	c = m.Clone()
	c.Funcs[0].Nodes[3].Attrs = Attrs{"x": FloatAttr(math.Copysign(0, -1))}
	if diffModules(m, c) == "" {
		t.Error("diffModules misses a changed attribute")
	}
	c = m.Clone()
	c.Funcs[0].Nodes[5].Inputs[0] = c.Funcs[0].Nodes[4].Output()
	if diffModules(m, c) == "" {
		t.Error("diffModules misses a rewired input")
	}
	if Text(m) != Text(allOpsModule(t)) {
		t.Error("changing a clone changed the original")
	}
}

// TestGoldenFilesParse parses every golden file and checks that it prints
// back to itself.
func TestGoldenFilesParse(t *testing.T) {
	for _, name := range []string{"all_ops.tir", "tiny_llama.tir"} {
		t.Run(name, func(t *testing.T) {
			txt := readTestdata(t, name)
			m, err := Parse(name, txt)
			if err != nil {
				t.Fatal(err)
			}
			if got := Text(m); got != txt {
				t.Errorf("%s does not print back to itself:\n%s", name, got)
			}
		})
	}
}

// tinyLlama builds a one-layer LLaMA-like decoder (the graph the llama
// frontend builds) for the golden file.
func tinyLlama(t testing.TB) *Module {
	t.Helper()
	const dim, hidden, heads, kvHeads, hd, vocab, maxSeq = 8, 16, 2, 1, 4, 32, 16
	m := NewModule("tiny-llama")
	m.Meta["arch"] = "llama"
	m.Meta["config"] = "dim=8 hidden=16 layers=1 heads=2 kv_heads=1 vocab=32 max_seq=16"
	w := map[string]*Value{}
	add := func(name string, s ...int64) { w[name] = m.AddWeight(name, T(F32, S(s...)), BytesSource(nil)) }
	add("tok_embeddings", vocab, dim)
	add("layers.0.attention_norm", dim)
	add("layers.0.attention.wq", heads*hd, dim)
	add("layers.0.attention.wk", kvHeads*hd, dim)
	add("layers.0.attention.wv", kvHeads*hd, dim)
	add("layers.0.attention.wo", dim, heads*hd)
	add("layers.0.ffn_norm", dim)
	add("layers.0.feed_forward.w1", hidden, dim)
	add("layers.0.feed_forward.w2", dim, hidden)
	add("layers.0.feed_forward.w3", hidden, dim)
	add("norm", dim)
	for _, fn := range []struct {
		name string
		seq  Dim
	}{{"prefill", Sym("seq")}, {"decode", D(1)}} {
		b := NewFunction(m, fn.name)
		seq := fn.seq
		tokens := b.Param("tokens", T(I32, Shape{seq}))
		pos := b.Param("pos", T(I32, Shape{}))
		cache := T(F32, S(maxSeq, kvHeads, hd))
		kc, vc := b.Param("k_cache.0", cache), b.Param("v_cache.0", cache)
		eps := Attrs{"eps": FloatAttr(1e-5)}
		rope := Attrs{"theta": FloatAttr(10000), "style": StringAttr("interleaved")}
		x := b.At("tok_embeddings").Op(OpGather, []*Value{w["tok_embeddings"], tokens}, nil)
		p := "layers.0."
		h := b.At(p+"attention_norm").Op(OpRMSNorm, []*Value{x, w[p+"attention_norm"]}, eps)
		q := b.Reshape(b.At(p+"attention.wq").Linear(h, w[p+"attention.wq"]), Shape{seq, D(heads), D(hd)})
		k := b.Reshape(b.At(p+"attention.wk").Linear(h, w[p+"attention.wk"]), Shape{seq, D(kvHeads), D(hd)})
		v := b.Reshape(b.At(p+"attention.wv").Linear(h, w[p+"attention.wv"]), Shape{seq, D(kvHeads), D(hd)})
		q = b.At(p+"attention.rope_q").Op(OpRope, []*Value{q, pos}, rope)
		k = b.At(p+"attention.rope_k").Op(OpRope, []*Value{k, pos}, rope)
		kc = b.At(p+"attention.k_cache").Op(OpKVWrite, []*Value{kc, k, pos}, nil)
		vc = b.At(p+"attention.v_cache").Op(OpKVWrite, []*Value{vc, v, pos}, nil)
		a := b.At(p+"attention").Op(OpAttention, []*Value{q, kc, vc, pos}, Attrs{"scale": FloatAttr(0.5)})
		a = b.Reshape(a, Shape{seq, D(heads * hd)})
		x = b.At(p+"attention.residual").Add(x, b.At(p+"attention.wo").Linear(a, w[p+"attention.wo"]))
		h = b.At(p+"ffn_norm").Op(OpRMSNorm, []*Value{x, w[p+"ffn_norm"]}, eps)
		g := b.At(p+"feed_forward.w1").Linear(h, w[p+"feed_forward.w1"])
		u := b.At(p+"feed_forward.w3").Linear(h, w[p+"feed_forward.w3"])
		g = b.At(p+"feed_forward.gate").Op(OpFusedElementwise, []*Value{g, u}, Attrs{"expr": StringAttr("mul(silu($0), $1)")})
		x = b.At(p+"feed_forward.residual").Add(x, b.At(p+"feed_forward.w2").Linear(g, w[p+"feed_forward.w2"]))
		x = b.At("norm").Op(OpRMSNorm, []*Value{x, w["norm"]}, eps)
		x = b.At("last_token").Op(OpSlice, []*Value{x}, Attrs{"axis": IntAttr(0), "start": IntAttr(-1), "end": IntAttr(math.MaxInt32)})
		logits := b.At("output").Linear(x, w["tok_embeddings"])
		next := b.At("sample").Op(OpArgmax, []*Value{logits}, nil)
		b.Return(logits, next, kc, vc)
		if b.Err() != nil {
			t.Fatal(b.Err())
		}
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTinyLlamaGolden(t *testing.T) {
	m := tinyLlama(t)
	txt := Text(m)
	golden(t, "tiny_llama.tir", txt)
	m2 := roundTrip(t, m)
	// Weights parse without sources; AttachWeights takes them from m.
	if m2.Weights[0].Source != nil {
		t.Error("a parsed weight has a source")
	}
	if err := m2.AttachWeights(m); err != nil {
		t.Fatal(err)
	}
	if m2.Weights[0].Source == nil {
		t.Error("AttachWeights left a weight without source")
	}
	// The decode logits are f32[1, 32]; prefill's too (the last token).
	for _, f := range m2.Funcs {
		if got := f.Results[0].Type.String(); got != "f32[1, 32]" {
			t.Errorf("func @%s logits %s, want f32[1, 32]", f.Name, got)
		}
	}
	if !strings.Contains(txt, "[seq, 2, 4]") {
		t.Error("prefill lost its symbolic dim")
	}
}

func TestAttachWeightsErrors(t *testing.T) {
	a := NewModule("a")
	a.AddWeight("x/y", T(F32, S(2)), nil)
	b := NewModule("b")
	if err := a.AttachWeights(b); err == nil || err.Error() != `weight @"x/y": not in "b"` {
		t.Errorf("missing weight: %v", err)
	}
	b.AddWeight("x/y", T(F32, S(3)), BytesSource{1})
	if err := a.AttachWeights(b); err == nil || err.Error() != `weight @"x/y": type f32[2], but "b" has f32[3]` {
		t.Errorf("type mismatch: %v", err)
	}
}

// TestPrintBrokenModule checks that printing never panics on a broken
// module (passes dump modules they have just broken).
func TestPrintBrokenModule(t *testing.T) {
	m := NewModule("broken")
	m.Weights = append(m.Weights, nil)
	m.Funcs = append(m.Funcs, nil, &Function{
		Name:    "f",
		Params:  []*Value{nil},
		Nodes:   []*Node{nil, {ID: 1, Op: OpAdd, Inputs: []*Value{nil}, Outputs: []*Value{nil}}},
		Results: []*Value{nil},
	})
	txt := Text(m)
	for _, want := range []string{"// nil weight", "// nil func", "// nil node", "%<nil> = add(%<nil>) : <nil> #1", "return %<nil>"} {
		if !strings.Contains(txt, want) {
			t.Errorf("missing %q in\n%s", want, txt)
		}
	}
	if err := Verify(m); err == nil {
		t.Error("Verify accepted a broken module")
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
