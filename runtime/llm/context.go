package llm

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tapml/tapml/ir"
)

// MaxCacheBytes bounds the KV caches a session allocates: a model file's
// header may claim any context length (a 110 KB llama2.c file can say
// seq_len 2^21, 32 GiB of cache), so runs size the caches by what they need
// (FitContext) and a session refuses more than this.
const MaxCacheBytes = 16 << 30

// ContextLength is the most tokens a session of the language model m can
// hold: its meta "max_seq" (frontend/arch records it: the KV caches'
// length, or a recurrent model's context, whose state does not grow), or
// for a module without it the rows of its first KV cache.
func ContextLength(m *ir.Module) (int, error) {
	if v, ok := m.Meta["max_seq"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("module %q: meta max_seq %q is not a positive integer", m.Name, v)
		}
		return n, nil
	}
	if dec := m.Func("decode"); dec != nil && len(dec.Params) > 2 && dec.Params[2].Type.Shape.Rank() > 0 {
		if d := dec.Params[2].Type.Shape[0]; d.IsStatic() {
			return int(d.Size), nil // the KV cache's rows
		}
	}
	return 0, fmt.Errorf("module %q has no meta max_seq and no KV cache to size a session by", m.Name)
}

// FitContext shrinks the context of a language model to n positions when
// it is longer, so that a run of n positions (prompt included) allocates
// the KV caches it needs rather than the header's maximum: the caches
// (the parameters kv_write writes; a recurrent state keeps its shape) get
// n rows and the meta max_seq becomes n. The types of the nodes that use
// the caches are inferred again. n <= 0, or n at least the context
// length, changes nothing.
func FitContext(m *ir.Module, n int) error {
	for _, name := range []string{"prefill", "decode"} {
		f := m.Func(name)
		if f == nil {
			return fmt.Errorf("module %q is not a language model: it needs functions @prefill and @decode", m.Name)
		}
		if err := checkSignature(f); err != nil {
			return err
		}
	}
	ctx, err := ContextLength(m)
	if err != nil {
		return err
	}
	if n <= 0 || n >= ctx {
		return nil
	}
	for _, name := range []string{"prefill", "decode"} {
		f := m.Func(name)
		caches := kvCaches(f)
		for _, p := range f.Params[2:] {
			if !caches[p] {
				continue
			}
			shape := slices.Clone(p.Type.Shape)
			shape[0] = ir.D(int64(n))
			p.Type = ir.T(p.Type.DType, shape)
		}
		for _, nd := range f.Nodes {
			in := make([]ir.Type, len(nd.Inputs))
			for i, v := range nd.Inputs {
				in[i] = v.Type
			}
			out, _, err := ir.InferTypes(nd.Op, in, nd.Attrs)
			if err != nil {
				return fmt.Errorf("fitting the context to %d positions: node %s: %w", n, nd, err)
			}
			for i, v := range nd.Outputs {
				v.Type = out[i]
			}
		}
	}
	m.Meta["max_seq"] = strconv.Itoa(n)
	return ir.Verify(m)
}

// kvCaches are the parameters of f that kv_write (or rope_kv_write) writes: KV caches, whose
// rows are positions.
func kvCaches(f *ir.Function) map[*ir.Value]bool {
	caches := map[*ir.Value]bool{}
	for _, nd := range f.Nodes {
		switch nd.Op {
		case ir.OpKVWrite:
			caches[nd.Inputs[0]] = true
		case ir.OpRopeKVWrite: // a decode step's fused kv_writes (passes/ropekv.go)
			caches[nd.Inputs[0]], caches[nd.Inputs[1]] = true, true
		}
	}
	return caches
}
