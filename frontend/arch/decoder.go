// Package arch builds the IR of decoder-only language models. The skeleton
// that every architecture family shares is written once, here: the weights,
// the "prefill" and "decode" functions with their calling convention, the
// token embedding, the stack of blocks with the state each layer carries
// from one call to the next, the final norm and the logits of the last
// position. A family (arch/llama, arch/gpt2) is a Config that returns a
// Decoder: its block body and the few hooks around it.
//
// Format loaders (frontend/llama2c, gguf, hf) map their files onto a
// family's Config and its canonical weight names (Config.WeightShapes) and
// call Build; none of them builds a graph itself.
package arch

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/tapml/tapml/ir"
)

// Config is an architecture family's configuration: the hyperparameters
// that a format loader fills in.
type Config interface {
	// Validate says whether the hyperparameters describe a buildable model.
	Validate() error
	// WeightShapes lists every weight the graph reads, in file order, by
	// canonical name.
	WeightShapes() []NamedShape
	// Decoder describes the graph of a valid configuration.
	Decoder() Decoder
}

// NamedShape is a weight's canonical name with its shape.
type NamedShape struct {
	Name  string
	Shape []int
}

// Named returns the NamedShape of name and dims.
func Named(name string, dims ...int) NamedShape { return NamedShape{Name: name, Shape: dims} }

// Decoder is what a family tells Build about its graph. Every hook builds
// nodes through the Forward it is given; the provenance of each node is
// the hook's to set (Forward.At), by the canonical weight names.
type Decoder struct {
	Arch   string // the module's meta "arch"
	Config string // the module's meta "config": the hyperparameters on one line

	Layers int
	// Parts are weights that Build makes as views of rows of a weight
	// of WeightShapes (a fused projection split at load, not copied); a
	// weight that parts are made of is not in the module itself.
	Parts []Part
	// MaxSeq is the most tokens a session may hold: the KV caches' length,
	// or for a recurrent model (whose state does not grow) the context its
	// configuration gives. Build records it as the module's meta
	// "max_seq", from which runtime/llm sizes a session.
	MaxSeq int
	// State lists what layer l carries from one call to the next: its KV
	// cache (KVCache), a recurrent state, or nothing (or State is nil: no
	// layer carries any). Each entry is a
	// parameter "NAME.l" of both functions, and the block's updated value
	// of it is a result, after the logits, in the order of the parameters.
	State func(l int) []State
	// Embed returns the hidden states [seq, dim] of f.Tokens at f.Pos.
	Embed func(f *Forward) *ir.Value
	// Block is layer l: x [seq, dim] and the layer's state in, the new
	// hidden states and state out. Its residual topology, norms and
	// per-layer settings are its own.
	Block func(f *Forward, l int, x *ir.Value, state []*ir.Value) (*ir.Value, []*ir.Value)
	// Norm is the final norm, applied to every position.
	Norm func(f *Forward, x *ir.Value) *ir.Value
	// Logits maps the last position's hidden state [1, dim] to the logits
	// [1, vocab]: the classifier and whatever follows it.
	Logits func(f *Forward, x *ir.Value) *ir.Value
	// Computed are f32 weights the family derives from its configuration
	// rather than reads from the checkpoint (RoPE frequency tables);
	// Forward.W finds them by name too.
	Computed []*Computed
}

// Computed is a weight computed from a configuration: its canonical name,
// shape and f32 elements, row-major.
type Computed struct {
	Name  string
	Shape []int
	Data  []float32
}

// Part is the weight Name: rows Lo..Hi-1 (along the first axis) of the
// weight Of.
type Part struct {
	Name, Of string
	Lo, Hi   int
}

// rowsSource is bytes [off, off+n) of another weight's bytes: a view, in
// that weight's dtype.
type rowsSource struct {
	of     ir.WeightSource
	off, n int
}

func (r rowsSource) DType() ir.DType { return ir.SourceDType(r.of) }

func (r rowsSource) Bytes() ([]byte, error) {
	b, err := r.of.Bytes()
	if err != nil {
		return nil, err
	}
	if len(b) < r.off+r.n {
		return nil, fmt.Errorf("a weight of %d bytes has no bytes %d..%d", len(b), r.off, r.off+r.n-1)
	}
	return b[r.off : r.off+r.n : r.off+r.n], nil
}

// State is one tensor a layer carries between calls.
type State struct {
	Name string // the parameter is Name + "." + layer
	Type ir.Type
}

// KVCache is the State of a layer with attention: its key and value
// caches, f32[maxSeq, kvHeads, headDim] each.
func KVCache(maxSeq, kvHeads, headDim int) []State {
	t := ir.T(ir.F32, ir.S(int64(maxSeq), int64(kvHeads), int64(headDim)))
	return []State{{"k_cache", t}, {"v_cache", t}}
}

// Forward is one function (prefill or decode) under construction: the
// builder, the function's inputs and the module's weights.
type Forward struct {
	*ir.Builder
	Seq    ir.Dim    // the token count: the symbol "seq" in prefill, 1 in decode
	Tokens *ir.Value // i32[seq]
	Pos    *ir.Value // i32[]: the position of the first token
	w      map[string]*ir.Value
}

// W returns the weight of a canonical name (nil for a name the config did
// not list, which the builder then reports at the node that uses it).
func (f *Forward) W(name string) *ir.Value { return f.w[name] }

// Heads reshapes x [seq, heads·headDim] to [seq, heads, headDim].
func (f *Forward) Heads(x *ir.Value, heads, headDim int) *ir.Value {
	return f.Reshape(x, ir.Shape{f.Seq, ir.D(int64(heads)), ir.D(int64(headDim))})
}

// CachedAttention writes k and v [seq, kvHeads, headDim] into the caches
// at f.Pos and attends q [seq, heads, headDim] over them, causally. It
// returns the heads joined back to [seq, heads·headDim] and the updated
// caches. Nodes are at prov (the attention), prov.k_cache and prov.v_cache.
func (f *Forward) CachedAttention(prov string, q, k, v, kCache, vCache *ir.Value, scale float64) (out, newK, newV *ir.Value) {
	return f.CachedAttentionWith(prov, q, k, v, kCache, vCache, ir.Attrs{"scale": ir.FloatAttr(scale)})
}

// CachedAttentionWith is CachedAttention with the attention node's
// attributes (scale, softcap, window).
func (f *Forward) CachedAttentionWith(prov string, q, k, v, kCache, vCache *ir.Value, attrs ir.Attrs) (out, newK, newV *ir.Value) {
	newK = f.At(prov+".k_cache").KVWrite(kCache, k, f.Pos)
	newV = f.At(prov+".v_cache").KVWrite(vCache, v, f.Pos)
	out = f.At(prov).Attention(q, newK, newV, f.Pos, attrs)
	s := q.Type.Shape
	if len(s) != 3 {
		return out, newK, newV // the attention node has already failed
	}
	return f.Reshape(out, ir.Shape{f.Seq, ir.D(s[1].Size * s[2].Size)}), newK, newV
}

// Rope rotates x [seq, heads, headDim] by f.Pos as r says, at prov; a
// frequency table is the node's third input.
func (f *Forward) Rope(prov string, x *ir.Value, r Rope) *ir.Value {
	in := []*ir.Value{x, f.Pos}
	if r.Table != nil {
		in = append(in, f.W(r.Table.Name))
	}
	return f.At(prov).Op(ir.OpRope, in, r.Attrs)
}

// Build returns the module of a model of configuration c: functions
// "prefill" (tokens i32[seq]) and "decode" (tokens i32[1]), both taking
// pos (i32[], the position of the first token) and every layer's state,
// and returning the logits of the last token (f32[1, vocab]) and the
// updated states. weights[name] supplies the data of each name of
// c.WeightShapes(); a weight keeps its source's dtype (ir.SourceDType:
// f32, f16, bf16 or a block format), see storeWeights.
func Build(name string, c Config, weights map[string]ir.WeightSource) (*ir.Module, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	d := c.Decoder()
	m := ir.NewModule(name)
	m.Meta["arch"] = d.Arch
	m.Meta["config"] = d.Config
	if d.MaxSeq > 0 {
		m.Meta["max_seq"] = strconv.Itoa(d.MaxSeq)
	}
	w, err := addWeights(m, c.WeightShapes(), d.Parts, weights)
	if err != nil {
		return nil, err
	}
	for _, c := range d.Computed {
		if _, dup := w[c.Name]; dup {
			return nil, fmt.Errorf("computed weight %q is also a weight of the checkpoint", c.Name)
		}
		w[c.Name] = m.AddWeight(c.Name, ir.T(ir.F32, ir.S(toInt64(c.Shape)...)), ir.BytesSource(f32Bytes(c.Data)))
	}
	for _, fn := range []struct {
		name string
		seq  ir.Dim
	}{{"prefill", ir.Sym("seq")}, {"decode", ir.D(1)}} {
		if err := d.build(m, fn.name, fn.seq, w); err != nil {
			return nil, err
		}
	}
	if err := storeWeights(m); err != nil {
		return nil, err
	}
	if err := ir.Verify(m); err != nil {
		return nil, err
	}
	return m, nil
}

// addWeights adds the weights ws (but those split into parts) and the
// parts to m, and returns them by name.
func addWeights(m *ir.Module, ws []NamedShape, parts []Part, weights map[string]ir.WeightSource) (map[string]*ir.Value, error) {
	f32 := func(dims []int) ir.Type { return ir.T(ir.F32, ir.S(toInt64(dims)...)) }
	shapes := map[string][]int{}
	for _, ns := range ws {
		if _, ok := weights[ns.Name]; !ok {
			return nil, fmt.Errorf("missing weight %q", ns.Name)
		}
		shapes[ns.Name] = ns.Shape
	}
	split := map[string]bool{}
	for _, p := range parts {
		split[p.Of] = true
	}
	w := map[string]*ir.Value{}
	for _, ns := range ws {
		if !split[ns.Name] {
			w[ns.Name] = m.AddWeight(ns.Name, f32(ns.Shape), weights[ns.Name])
		}
	}
	for _, p := range parts {
		of, ok := shapes[p.Of]
		if !ok || len(of) == 0 || p.Lo < 0 || p.Lo >= p.Hi || p.Hi > of[0] {
			return nil, fmt.Errorf("part %q: rows %d..%d of %q %v", p.Name, p.Lo, p.Hi-1, p.Of, of)
		}
		rowElems := 1
		for _, d := range of[1:] {
			rowElems *= d
		}
		dt := ir.SourceDType(weights[p.Of])
		row := int(dt.Bytes(int64(rowElems)))
		if row < 0 {
			return nil, fmt.Errorf("part %q: the rows of %q %v are not whole blocks of its %s", p.Name, p.Of, of, dt)
		}
		shape := append([]int{p.Hi - p.Lo}, of[1:]...)
		w[p.Name] = m.AddWeight(p.Name, f32(shape), rowsSource{of: weights[p.Of], off: p.Lo * row, n: (p.Hi - p.Lo) * row})
	}
	return w, nil
}

func toInt64(dims []int) []int64 {
	s := make([]int64, len(dims))
	for i, d := range dims {
		s[i] = int64(d)
	}
	return s
}

// f32Bytes is xs as little-endian bytes.
func f32Bytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// build adds one function of the calling convention to m.
func (d Decoder) build(m *ir.Module, name string, seq ir.Dim, w map[string]*ir.Value) error {
	f := &Forward{Builder: ir.NewFunction(m, name), Seq: seq, w: w}
	f.Tokens = f.Param("tokens", ir.T(ir.I32, ir.Shape{seq}))
	f.Pos = f.Param("pos", ir.T(ir.I32, ir.Shape{}))
	state := make([][]*ir.Value, d.Layers)
	for l := range state {
		if d.State == nil {
			break // no layer carries state
		}
		for _, s := range d.State(l) {
			state[l] = append(state[l], f.Param(fmt.Sprintf("%s.%d", s.Name, l), s.Type))
		}
	}
	x := d.Embed(f)
	for l := range state {
		n := len(state[l])
		if x, state[l] = d.Block(f, l, x, state[l]); len(state[l]) != n {
			return fmt.Errorf("func @%s: block %d returned %d state tensors for its %d", name, l, len(state[l]), n)
		}
	}
	x = d.Norm(f, x)
	x = f.At("last_token").Slice(x, 0, -1, math.MaxInt32)
	results := []*ir.Value{d.Logits(f, x)}
	for _, s := range state {
		results = append(results, s...)
	}
	f.Return(results...)
	return f.Err()
}
