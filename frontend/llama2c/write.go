package llama2c

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/ir"
)

// WriteOptions chooses the format Write produces.
type WriteOptions struct {
	Version int  // 0: legacy header (run.c reads it), 1: export.py version 1
	FreqCis bool // legacy only: include the freq_cis tables as the old exporter did
}

// Write writes a checkpoint of a model with configuration c (which must
// have run.c's fixed hyperparameters: eps 1e-5, interleaved RoPE, theta
// 10000) and f32 weights by canonical name, in the order the format
// prescribes. It is the inverse of Open, used to make test checkpoints and
// to hand tapml's models to run.c.
func Write(w io.Writer, c llama.Config, weights map[string]ir.WeightSource, o WriteOptions) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.NormEps != 1e-5 || c.RopeTheta != 10000 || c.RopeStyle != "interleaved" {
		return fmt.Errorf("llama2.c checkpoints fix eps 1e-5, RoPE theta 10000, interleaved; config has eps %g, theta %g, %s",
			c.NormEps, c.RopeTheta, c.RopeStyle)
	}
	if o.Version != 0 && o.Version != 1 {
		return fmt.Errorf("unknown llama2.c checkpoint version %d", o.Version)
	}
	if o.Version == 1 && o.FreqCis {
		return fmt.Errorf("version 1 checkpoints have no freq_cis tables")
	}
	h := Header{Version: o.Version, Dim: c.Dim, HiddenDim: c.HiddenDim, Layers: c.Layers, Heads: c.Heads,
		KVHeads: c.KVHeads, Vocab: c.Vocab, SeqLen: c.MaxSeq, Shared: c.TiedEmbeddings}
	if err := h.validate(); err != nil {
		return err
	}
	sizes := map[string]int{}
	for _, ns := range c.WeightShapes() {
		n := 1
		for _, d := range ns.Shape {
			n *= d
		}
		sizes[ns.Name] = 4 * n
	}
	bw := bufio.NewWriter(w)
	var err error
	put := func(vs ...int32) {
		for _, v := range vs {
			if err == nil {
				err = binary.Write(bw, binary.LittleEndian, v)
			}
		}
	}
	weight := func(name string) {
		if err != nil {
			return
		}
		src, ok := weights[name]
		if !ok {
			err = fmt.Errorf("missing weight %q", name)
			return
		}
		var b []byte
		if b, err = src.Bytes(); err != nil {
			err = fmt.Errorf("weight %q: %w", name, err)
			return
		}
		if len(b) != sizes[name] {
			err = fmt.Errorf("weight %q has %d bytes, want %d", name, len(b), sizes[name])
			return
		}
		_, err = bw.Write(b)
	}
	perLayer := func(suffix string) {
		for l := 0; l < c.Layers; l++ {
			weight("layers." + strconv.Itoa(l) + "." + suffix)
		}
	}
	dims := []int32{int32(c.Dim), int32(c.HiddenDim), int32(c.Layers), int32(c.Heads), int32(c.KVHeads), int32(c.Vocab), int32(c.MaxSeq)}
	if o.Version == 1 {
		put(v1Magic, 1)
		put(dims...)
		shared := byte(0)
		if c.TiedEmbeddings {
			shared = 1
		}
		if err == nil {
			_, err = bw.Write(append([]byte{shared}, make([]byte, v1HeaderSize-37)...))
		}
		perLayer("attention_norm")
		perLayer("ffn_norm")
		weight("norm")
		weight("tok_embeddings")
	} else {
		if !c.TiedEmbeddings {
			dims[5] = -dims[5]
		}
		put(dims...)
		weight("tok_embeddings")
		perLayer("attention_norm")
	}
	perLayer("attention.wq")
	perLayer("attention.wk")
	perLayer("attention.wv")
	perLayer("attention.wo")
	if o.Version == 0 {
		perLayer("ffn_norm")
	}
	perLayer("feed_forward.w1")
	perLayer("feed_forward.w2")
	perLayer("feed_forward.w3")
	if o.Version == 0 {
		weight("norm")
		if o.FreqCis && err == nil {
			err = writeFreqCis(bw, c)
		}
	}
	if !c.TiedEmbeddings {
		weight("output")
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// writeFreqCis writes the legacy RoPE tables, cos then sin of
// pos / theta^(2i/head_size), each (seq_len, head_size/2), rounding to
// float32 where llama2.c's PyTorch code (precompute_freqs_cis) does.
func writeFreqCis(w io.Writer, c llama.Config) error {
	hs := c.HeadDim()
	for _, f := range []func(float64) float64{math.Cos, math.Sin} {
		buf := make([]byte, 0, 4*c.MaxSeq*hs/2)
		for pos := 0; pos < c.MaxSeq; pos++ {
			for i := 0; i < hs/2; i++ {
				e := float32(2*i) / float32(hs)
				freq := 1 / float32(math.Pow(c.RopeTheta, float64(e)))
				angle := float32(pos) * freq
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(f(float64(angle)))))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
