// Package llama2c imports llama2.c checkpoints (the legacy header that
// run.c reads, and export.py's "version 1" header) and llama2.c tokenizer
// files (tok*.bin).
//
// Weights are not copied: the checkpoint is memory-mapped read-only and
// every weight of the module is a view of its bytes.
package llama2c

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/internal/mmap"
	"github.com/tapml/tapml/ir"
)

// Header sizes and the magic of the version-1 header ("ak42" as a
// little-endian uint32).
const (
	legacyHeaderSize = 7 * 4
	v1HeaderSize     = 256
	v1Magic          = 0x616b3432
)

// Limits on header values: far above any llama2.c-format model, low enough
// that sizes cannot overflow and that random bytes are not taken for a
// checkpoint.
const (
	maxDim    = 1 << 16
	maxHidden = 1 << 18
	maxLayers = 1 << 10
	maxVocab  = 1 << 21
	maxSeq    = 1 << 21
)

// Header is what a checkpoint's header says about the model.
type Header struct {
	Version   int // 0: legacy (run.c), 1: export.py version 1
	Dim       int
	HiddenDim int
	Layers    int
	Heads     int
	KVHeads   int
	Vocab     int  // always positive here; the legacy sign is in Shared
	SeqLen    int  // max sequence length
	Shared    bool // the classifier is the token embedding (no "output" weight)
}

// HeaderSize is the number of bytes before the first weight.
func (h Header) HeaderSize() int64 {
	if h.Version == 1 {
		return v1HeaderSize
	}
	return legacyHeaderSize
}

// Config maps the header onto the shared LLaMA configuration, with run.c's
// fixed hyperparameters: RMSNorm eps 1e-5, interleaved RoPE with theta 10000.
func (h Header) Config() llama.Config {
	return llama.Config{
		Dim: h.Dim, HiddenDim: h.HiddenDim, Layers: h.Layers, Heads: h.Heads, KVHeads: h.KVHeads,
		Vocab: h.Vocab, MaxSeq: h.SeqLen, NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved",
		TiedEmbeddings: h.Shared,
	}
}

func (h Header) String() string {
	cls := "shared classifier"
	if !h.Shared {
		cls = "separate classifier"
	}
	return fmt.Sprintf("dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d, %s",
		h.Dim, h.HiddenDim, h.Layers, h.Heads, h.KVHeads, h.Vocab, h.SeqLen, cls)
}

// headSize is dim / n_heads.
func (h Header) headSize() int64 { return int64(h.Dim / h.Heads) }

// weightBytes returns the size of the weights without the freq_cis tables.
func (h Header) weightBytes() int64 {
	d, hd, l, v := int64(h.Dim), int64(h.HiddenDim), int64(h.Layers), int64(h.Vocab)
	kv := int64(h.KVHeads) * h.headSize()
	q := int64(h.Heads) * h.headSize()
	n := v*d + // token embedding
		l*d*2 + // attention and ffn norms
		l*(q*d+2*kv*d+d*q) + // wq, wk, wv, wo
		l*3*d*hd + // w1, w2, w3
		d // final norm
	if !h.Shared {
		n += v * d
	}
	return 4 * n
}

// freqCisBytes is the size of the legacy freq_cis_real and freq_cis_imag
// tables, (seq_len, head_size/2) each.
func (h Header) freqCisBytes() int64 { return 4 * int64(h.SeqLen) * (h.headSize() / 2) * 2 }

// FileSizes returns the sizes a checkpoint with this header may have: with
// the freq_cis tables (as the legacy exporter wrote them; run.c skips them)
// and without. A version-1 file has no tables.
func (h Header) FileSizes() []int64 {
	base := h.HeaderSize() + h.weightBytes()
	if h.Version == 1 {
		return []int64{base}
	}
	return []int64{base + h.freqCisBytes(), base}
}

// validate checks that the header describes a model this package can load.
func (h Header) validate() error {
	type field struct {
		name    string
		v, max_ int
	}
	for _, f := range []field{
		{"dim", h.Dim, maxDim}, {"hidden_dim", h.HiddenDim, maxHidden}, {"n_layers", h.Layers, maxLayers},
		{"n_heads", h.Heads, maxDim}, {"n_kv_heads", h.KVHeads, maxDim}, {"vocab_size", h.Vocab, maxVocab},
		{"seq_len", h.SeqLen, maxSeq},
	} {
		if f.v <= 0 || f.v > f.max_ {
			return fmt.Errorf("bad header: %s %d is not in 1..%d (%s)", f.name, f.v, f.max_, h)
		}
	}
	switch {
	case h.Dim%h.Heads != 0:
		return fmt.Errorf("bad header: n_heads %d does not divide dim %d (%s)", h.Heads, h.Dim, h)
	case h.KVHeads > h.Heads || h.Heads%h.KVHeads != 0:
		return fmt.Errorf("bad header: n_kv_heads %d does not divide n_heads %d (%s)", h.KVHeads, h.Heads, h)
	case (h.Dim/h.Heads)%2 != 0:
		return fmt.Errorf("bad header: head size %d (dim/n_heads) is odd; RoPE needs pairs (%s)", h.Dim/h.Heads, h)
	}
	return nil
}

// ParseHeader reads a checkpoint header from the first bytes of a file (at
// least 28 bytes; 256 for a version-1 file) and validates its values. It
// does not check the file size.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < legacyHeaderSize {
		return Header{}, fmt.Errorf("not a llama2.c checkpoint: %d bytes, shorter than the %d-byte header", len(b), legacyHeaderSize)
	}
	i32 := func(off int) int { return int(int32(binary.LittleEndian.Uint32(b[off:]))) }
	var h Header
	if binary.LittleEndian.Uint32(b) == v1Magic {
		if v := i32(4); v != 1 {
			return Header{}, fmt.Errorf("unsupported llama2.c export version %d (only the fp32 version 1 and the legacy header are supported)", v)
		}
		if len(b) < v1HeaderSize {
			return Header{}, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte version 1 header", len(b), v1HeaderSize)
		}
		h = Header{Version: 1, Dim: i32(8), HiddenDim: i32(12), Layers: i32(16), Heads: i32(20),
			KVHeads: i32(24), Vocab: i32(28), SeqLen: i32(32)}
		switch b[36] {
		case 0:
		case 1:
			h.Shared = true
		default:
			return Header{}, fmt.Errorf("bad header: shared_classifier flag is %d, not 0 or 1", b[36])
		}
		if h.Vocab <= 0 {
			return Header{}, fmt.Errorf("bad header: vocab_size %d is not positive (%s)", h.Vocab, h)
		}
	} else {
		h = Header{Dim: i32(0), HiddenDim: i32(4), Layers: i32(8), Heads: i32(12),
			KVHeads: i32(16), Vocab: i32(20), SeqLen: i32(24)}
		// A negative vocab_size marks a separate classifier (run.c's "bit yikes").
		h.Shared = h.Vocab > 0
		if h.Vocab < 0 && h.Vocab != math.MinInt32 {
			h.Vocab = -h.Vocab
		}
	}
	return h, h.validate()
}

// Sniff reports whether header (the first bytes of a file, 256 are enough)
// looks like a llama2.c checkpoint: the version-1 magic, or a legacy header
// whose seven numbers are a plausible model. Legacy files have no magic, so
// SniffFile, which also checks the file size, is the surer test.
func Sniff(header []byte) bool {
	_, err := ParseHeader(header)
	return err == nil
}

// SniffFile reports whether the file at path is a llama2.c checkpoint: a
// valid header and exactly the size that header implies.
func SniffFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false
	}
	buf := make([]byte, v1HeaderSize)
	n, _ := f.ReadAt(buf, 0)
	h, err := ParseHeader(buf[:n])
	if err != nil {
		return false
	}
	_, err = h.layout(st.Size())
	return err == nil
}

// layout checks size against the sizes h allows and returns whether the
// freq_cis tables are present.
func (h Header) layout(size int64) (freqCis bool, err error) {
	sizes := h.FileSizes()
	for i, s := range sizes {
		if size == s {
			return h.Version == 0 && i == 0, nil
		}
	}
	want := strconv.FormatInt(sizes[0], 10) + " bytes"
	if len(sizes) == 2 {
		want += " (or " + strconv.FormatInt(sizes[1], 10) + " without the freq_cis tables)"
	}
	if size < sizes[len(sizes)-1] {
		return false, fmt.Errorf("truncated: header says %s, needs %s, file has %d", h, want, size)
	}
	return false, fmt.Errorf("size mismatch: header says %s, needs %s, file has %d", h, want, size)
}

// Checkpoint is an open llama2.c checkpoint: its header and a read-only
// mapping of the file that its weights view.
type Checkpoint struct {
	Path    string
	Header  Header
	FreqCis bool // the legacy freq_cis tables are present (and ignored)
	data    []byte
	unmap   func() error
}

// Open maps the checkpoint at path and validates it. Every error names the
// file and says what is wrong with it.
func Open(path string) (*Checkpoint, error) {
	c, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func open(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, unwrapPathError(err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	buf := make([]byte, v1HeaderSize)
	n, _ := f.ReadAt(buf, 0)
	h, err := ParseHeader(buf[:n])
	if err != nil {
		return nil, err
	}
	freq, err := h.layout(st.Size())
	if err != nil {
		return nil, err
	}
	data, unmap, err := mmap.Map(f, st.Size())
	if err != nil {
		return nil, err
	}
	return &Checkpoint{Path: path, Header: h, FreqCis: freq, data: data, unmap: unmap}, nil
}

// unwrapPathError drops the path from an *os.PathError, since the caller
// prefixes every error with the path.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// Close releases the mapping. Weights obtained from the checkpoint must not
// be used afterwards.
func (c *Checkpoint) Close() error {
	if c.unmap == nil {
		return nil
	}
	err := c.unmap()
	c.unmap, c.data = nil, nil
	return err
}

// Weights returns a view of every weight, by its canonical name
// (llama.Config.WeightShapes). Stacked per-layer arrays are split into one
// view per layer.
func (c *Checkpoint) Weights() map[string]ir.WeightSource {
	h := c.Header
	d, hd, v := int64(h.Dim), int64(h.HiddenDim), int64(h.Vocab)
	q := int64(h.Heads) * h.headSize()
	kv := int64(h.KVHeads) * h.headSize()
	out := map[string]ir.WeightSource{}
	off := h.HeaderSize()
	take := func(name string, n int64) {
		out[name] = ir.BytesSource(c.data[off : off+4*n : off+4*n])
		off += 4 * n
	}
	perLayer := func(suffix string, n int64) {
		for l := 0; l < h.Layers; l++ {
			take("layers."+strconv.Itoa(l)+"."+suffix, n)
		}
	}
	if h.Version == 1 {
		// export.py version1_export: norms first, then the embedding and matrices.
		perLayer("attention_norm", d)
		perLayer("ffn_norm", d)
		take("norm", d)
		take("tok_embeddings", v*d)
	} else {
		// run.c's memory_map_weights.
		take("tok_embeddings", v*d)
		perLayer("attention_norm", d)
	}
	perLayer("attention.wq", q*d)
	perLayer("attention.wk", kv*d)
	perLayer("attention.wv", kv*d)
	perLayer("attention.wo", d*q)
	if h.Version == 0 {
		perLayer("ffn_norm", d)
	}
	perLayer("feed_forward.w1", hd*d)
	perLayer("feed_forward.w2", d*hd)
	perLayer("feed_forward.w3", hd*d)
	if h.Version == 0 {
		take("norm", d)
		if c.FreqCis {
			off += h.freqCisBytes()
		}
	}
	if !h.Shared {
		take("output", v*d)
	}
	return out
}

// Module builds the IR of the checkpoint's model; its weights view the
// mapping, which must stay open while the module is used.
func (c *Checkpoint) Module() (*ir.Module, error) {
	name := strings.TrimSuffix(filepath.Base(c.Path), filepath.Ext(c.Path))
	m, err := arch.Build(name, c.Header.Config(), c.Weights())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	m.Meta["source"] = c.Path
	m.Meta["format"] = c.Format()
	return m, nil
}

// Format names the checkpoint's format, as recorded in the module metadata.
func (c *Checkpoint) Format() string {
	if c.Header.Version == 1 {
		return "llama2.c v1"
	}
	if c.FreqCis {
		return "llama2.c legacy"
	}
	return "llama2.c legacy (no freq_cis)"
}

// Load imports the llama2.c checkpoint at path. The file stays mapped for
// the life of the process, since the module's weights view it.
func Load(path string) (*ir.Module, error) {
	c, err := Open(path)
	if err != nil {
		return nil, err
	}
	m, err := c.Module()
	if err != nil {
		c.Close()
		return nil, err
	}
	return m, nil
}
