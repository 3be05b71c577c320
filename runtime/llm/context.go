package llm

import (
	"fmt"
	"slices"

	"github.com/tapml/tapml/ir"
)

// MaxCacheBytes bounds the KV caches a session allocates: a model file's
// header may claim any context length (a 110 KB llama2.c file can say
// seq_len 2^21, 32 GiB of cache), so runs size the caches by what they need
// (FitContext) and a session refuses more than this.
const MaxCacheBytes = 16 << 30

// FitContext shrinks the KV caches of a language model to n positions when
// its context is longer, so that a run of n positions (prompt included)
// allocates what it needs rather than the header's maximum. The types of
// the nodes that use the caches are inferred again. n <= 0, or n at least
// the context length, changes nothing.
func FitContext(m *ir.Module, n int) error {
	for _, name := range []string{"prefill", "decode"} {
		f := m.Func(name)
		if f == nil {
			return fmt.Errorf("module %q is not a language model: it needs functions @prefill and @decode", m.Name)
		}
		if err := checkSignature(f); err != nil {
			return err
		}
		if n <= 0 || len(f.Params) < 3 || n >= f.Params[2].Type.Shape.Sizes()[0] {
			return nil
		}
	}
	for _, name := range []string{"prefill", "decode"} {
		f := m.Func(name)
		for _, p := range f.Params[2:] {
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
	return ir.Verify(m)
}
