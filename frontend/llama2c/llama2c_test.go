package llama2c

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
)

func stories(t testing.TB) (model, tok string) {
	d := testenv.Models(t)
	return filepath.Join(d, "stories260K.bin"), filepath.Join(d, "tok512.bin")
}

func TestLoadStories260K(t *testing.T) {
	path, _ := stories(t)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := Header{Version: 0, Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, Vocab: 512, SeqLen: 512, Shared: true}
	if diff := cmp.Diff(want, c.Header); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if !c.FreqCis {
		t.Errorf("FreqCis = false; stories260K.bin has the tables")
	}
	wantCfg := llama.Config{Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, Vocab: 512, MaxSeq: 512,
		NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved", TiedEmbeddings: true}
	if diff := cmp.Diff(wantCfg, c.Header.Config()); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "stories260K" || m.Meta["source"] != path || m.Meta["format"] != "llama2.c legacy" {
		t.Errorf("name %q, meta %v", m.Name, m.Meta)
	}
	if m.Func("prefill") == nil || m.Func("decode") == nil {
		t.Errorf("functions missing: %v", m.Funcs)
	}
	if len(m.Weights) != len(wantCfg.WeightShapes()) {
		t.Errorf("%d weights, want %d", len(m.Weights), len(wantCfg.WeightShapes()))
	}

	// Check some weights against the file, read with offsets computed here
	// from run.c's layout: header, embedding, rms_att, wq, wk, wv, wo,
	// rms_ffn, w1, w2, w3, rms_final.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const d, hd, L, V, kv = 64, 172, 5, 512, 32
	off := map[string]int{}
	o := 28
	for _, s := range []struct {
		name string
		n    int
	}{{"emb", V * d}, {"att", L * d}, {"wq", L * d * d}, {"wk", L * d * kv}, {"wv", L * d * kv}, {"wo", L * d * d},
		{"ffn", L * d}, {"w1", L * hd * d}, {"w2", L * d * hd}, {"w3", L * hd * d}, {"final", d}} {
		off[s.name] = o
		o += 4 * s.n
	}
	fileF32 := func(byteOff int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(raw[byteOff:])) }
	for _, tc := range []struct {
		weight string
		elem   int // element index in the weight
		file   int // byte offset in the file
	}{
		{"tok_embeddings", 0, off["emb"]},
		{"tok_embeddings", V*d - 1, off["emb"] + 4*(V*d-1)},
		{"layers.0.attention_norm", 3, off["att"] + 4*3},
		{"layers.2.attention.wk", 7, off["wk"] + 4*(2*d*kv+7)},
		{"layers.4.attention.wo", d*d - 1, off["wo"] + 4*(4*d*d+d*d-1)},
		{"layers.1.ffn_norm", 0, off["ffn"] + 4*d},
		{"layers.3.feed_forward.w2", 100, off["w2"] + 4*(3*d*hd+100)},
		{"layers.4.feed_forward.w3", hd*d - 1, off["w3"] + 4*(5*hd*d-1)},
		{"norm", d - 1, off["final"] + 4*(d-1)},
	} {
		w := m.Weight(tc.weight)
		if w == nil {
			t.Errorf("no weight %s", tc.weight)
			continue
		}
		b, err := w.Source.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*tc.elem:]))
		if want := fileF32(tc.file); got != want {
			t.Errorf("%s[%d] = %g, file has %g", tc.weight, tc.elem, got, want)
		}
	}
	// freq_cis follows the final norm: 2 tables of seq_len * head_size/2.
	if size := o + 2*4*512*(64/8/2); size != len(raw) {
		t.Errorf("computed size %d, file %d", size, len(raw))
	}
	// The norm weights of a trained model are not all ones; a wrong offset
	// would typically land on a matrix.
	b, _ := m.Weight("norm").Source.Bytes()
	if len(b) != 4*d {
		t.Errorf("norm has %d bytes", len(b))
	}
}

// TestGoldenPieces replays the token ids of run.c's greedy runs through
// Piece and compares with what run.c printed.
func TestGoldenPieces(t *testing.T) {
	model, tokPath := stories(t)
	tok, err := LoadTokenizer(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	_ = model
	for _, name := range []string{"stories260K_greedy", "stories260K_once_upon_a_time"} {
		ids := readIDs(t, filepath.Join("testdata", name+".ids"))
		want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for i := 1; i < len(ids); i++ {
			out.WriteString(tok.Piece(ids[i-1], ids[i]))
		}
		out.WriteString("\n")
		if out.String() != string(want) {
			t.Errorf("%s: pieces of the ids print\n%q\nrun.c printed\n%q", name, out.String(), want)
		}
	}
	// The prompt's ids are Encode's.
	ids := readIDs(t, filepath.Join("testdata", "stories260K_once_upon_a_time.ids"))
	enc := tok.Encode("Once upon a time", true, false)
	if !cmp.Equal(enc, ids[:len(enc)]) {
		t.Errorf("Encode(prompt) = %v, run starts %v", enc, ids[:len(enc)])
	}
}

func readIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, f := range strings.Fields(string(b)) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestEncodeGolden checks Encode against run.c's encode() on tok512.
func TestEncodeGolden(t *testing.T) {
	_, tokPath := stories(t)
	tok, err := LoadTokenizer(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "tok512_encode.golden"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		head, idsText, ok := strings.Cut(line, "|")
		f := strings.Fields(head)
		if !ok || len(f) != 3 {
			t.Fatalf("bad golden line %q", line)
		}
		text := ""
		if f[0] != "-" {
			raw, err := hexDecode(f[0])
			if err != nil {
				t.Fatal(err)
			}
			text = string(raw)
		}
		want := []int{}
		for _, s := range strings.Fields(idsText) {
			id, _ := strconv.Atoi(s)
			want = append(want, id)
		}
		got := tok.Encode(text, f[1] == "1", f[2] == "1")
		if got == nil {
			got = []int{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Encode(%q, %s, %s) (-run.c +ours):\n%s", text, f[1], f[2], diff)
		}
		n++
	}
	if n < 40 {
		t.Errorf("only %d golden cases", n)
	}
}

func hexDecode(s string) ([]byte, error) {
	out := make([]byte, len(s)/2)
	for i := range out {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, err
		}
		out[i] = byte(v)
	}
	return out, nil
}

// tiny is a small GQA configuration for round trips.
var tiny = llama.Config{Dim: 16, HiddenDim: 24, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 11, MaxSeq: 8,
	NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved"}

func TestWriteOpenRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		opts   WriteOptions
		format string
	}{
		{"v1_shared", true, WriteOptions{Version: 1}, "llama2.c v1"},
		{"v1_unshared", false, WriteOptions{Version: 1}, "llama2.c v1"},
		{"legacy_shared_freq", true, WriteOptions{FreqCis: true}, "llama2.c legacy"},
		{"legacy_unshared_freq", false, WriteOptions{FreqCis: true}, "llama2.c legacy"},
		{"legacy_shared", true, WriteOptions{}, "llama2.c legacy (no freq_cis)"},
		{"legacy_unshared", false, WriteOptions{}, "llama2.c legacy (no freq_cis)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tiny
			cfg.TiedEmbeddings = tc.shared
			weights := llama.RandomWeights(cfg, 7)
			var buf bytes.Buffer
			if err := Write(&buf, cfg, weights, tc.opts); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), tc.name+".bin")
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if !SniffFile(path) || !Sniff(buf.Bytes()[:256]) {
				t.Errorf("Sniff does not recognise the file")
			}
			c, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if diff := cmp.Diff(cfg, c.Header.Config()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if c.Header.Version != tc.opts.Version || c.FreqCis != tc.opts.FreqCis || c.Format() != tc.format {
				t.Errorf("version %d freq %v format %q", c.Header.Version, c.FreqCis, c.Format())
			}
			got := c.Weights()
			if len(got) != len(weights) {
				t.Errorf("%d weights, want %d", len(got), len(weights))
			}
			for name, src := range weights {
				want, _ := src.Bytes()
				if got[name] == nil {
					t.Errorf("missing %s", name)
					continue
				}
				b, _ := got[name].Bytes()
				if !bytes.Equal(b, want) {
					t.Errorf("weight %s differs", name)
				}
			}
			m, err := c.Module()
			if err != nil {
				t.Fatal(err)
			}
			if m.Meta["format"] != tc.format {
				t.Errorf("format %q", m.Meta["format"])
			}
		})
	}
}

// TestFreqCisMatchesFile checks Write's freq_cis tables against the ones in
// stories260K.bin (exported by llama2.c's Python code).
func TestFreqCisMatchesFile(t *testing.T) {
	path, _ := stories(t)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var buf bytes.Buffer
	if err := Write(&buf, c.Header.Config(), c.Weights(), WriteOptions{FreqCis: true}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if len(raw) != buf.Len() {
		t.Fatalf("wrote %d bytes, file has %d", buf.Len(), len(raw))
	}
	// Same everything but the tables, which may differ in the last bit.
	n := c.Header.freqCisBytes()
	start := int64(len(raw)) - n
	if !bytes.Equal(raw[:start], buf.Bytes()[:start]) {
		t.Errorf("header or weights differ")
	}
	for i := start; i < int64(len(raw)); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(buf.Bytes()[i:]))
		if math.Abs(float64(a-b)) > 1e-6 { // PyTorch's float32 cos/sin differ by an ulp at times
			t.Fatalf("freq_cis at byte %d: file %g, ours %g", i, a, b)
		}
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func legacyHeader(dims ...int32) []byte {
	var b []byte
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint32(b, uint32(d))
	}
	return b
}

func TestLoadErrors(t *testing.T) {
	path, _ := stories(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := func(version int32, shared byte, dims ...int32) []byte {
		b := legacyHeader(append([]int32{v1Magic, version}, dims...)...)
		b = append(b, shared)
		return append(b, make([]byte, 256-len(b))...)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want []string // all must appear in the error
	}{
		{"truncated", raw[:1000], []string{"stories260K.bin: truncated: header says dim 64, hidden_dim 172, n_layers 5, n_heads 8, n_kv_heads 4, vocab_size 512, seq_len 512, shared classifier, needs 1056540 bytes (or 1040156 without the freq_cis tables), file has 1000"}},
		{"too long", append(append([]byte{}, raw...), 0, 0, 0, 0), []string{"stories260K.bin: size mismatch:", "file has 1056544"}},
		{"empty", nil, []string{"stories260K.bin: not a llama2.c checkpoint: 0 bytes"}},
		{"short", raw[:20], []string{"stories260K.bin: not a llama2.c checkpoint: 20 bytes"}},
		{"negative dim", legacyHeader(-64, 172, 5, 8, 4, 512, 512), []string{"stories260K.bin: bad header: dim -64 is not in 1..65536"}},
		{"zero layers", legacyHeader(64, 172, 0, 8, 4, 512, 512), []string{"stories260K.bin: bad header: n_layers 0"}},
		{"heads", legacyHeader(64, 172, 5, 7, 7, 512, 512), []string{"stories260K.bin: bad header: n_heads 7 does not divide dim 64"}},
		{"kv heads", legacyHeader(64, 172, 5, 8, 3, 512, 512), []string{"stories260K.bin: bad header: n_kv_heads 3 does not divide n_heads 8"}},
		{"odd head", legacyHeader(24, 172, 5, 8, 4, 512, 512), []string{"stories260K.bin: bad header: head size 3"}},
		{"huge", legacyHeader(1<<30, 1<<30, 1<<30, 1, 1, 1<<30, 1<<30), []string{"stories260K.bin: bad header: dim 1073741824"}},
		{"min vocab", legacyHeader(64, 172, 5, 8, 4, math.MinInt32, 512), []string{"stories260K.bin: bad header: vocab_size -2147483648"}},
		{"v1 version", v1(2, 0, 64, 172, 5, 8, 4, 512, 512), []string{"stories260K.bin: unsupported llama2.c export version 2"}},
		{"v1 short", v1(1, 0, 64, 172, 5, 8, 4, 512, 512)[:100], []string{"stories260K.bin: truncated: 100 bytes, shorter than the 256-byte version 1 header"}},
		{"v1 flag", v1(1, 7, 64, 172, 5, 8, 4, 512, 512), []string{"stories260K.bin: bad header: shared_classifier flag is 7"}},
		{"v1 vocab", v1(1, 1, 64, 172, 5, 8, 4, -512, 512), []string{"stories260K.bin: bad header: vocab_size -512"}},
		{"v1 truncated", v1(1, 1, 64, 172, 5, 8, 4, 512, 512), []string{"stories260K.bin: truncated: header says dim 64", "needs 1040384 bytes, file has 256"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "stories260K.bin", tc.data)
			_, err := Load(p)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), p+": ") || strings.Count(err.Error(), "stories260K.bin") != 1 {
				t.Errorf("error %q should name the file once, at the start", err)
			}
			if Sniff(tc.data) && tc.name != "truncated" && tc.name != "too long" && !strings.HasPrefix(tc.name, "v1 truncated") {
				t.Errorf("Sniff accepts a bad header")
			}
			if SniffFile(p) {
				t.Errorf("SniffFile accepts a bad file")
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nothere.bin")
	_, err := Load(p)
	if err == nil || err.Error() != p+": open: no such file or directory" {
		t.Errorf("error %v", err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error does not wrap os.ErrNotExist")
	}
	_, err = Load(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: error %v", err)
	}
}

func TestSniffOtherFormats(t *testing.T) {
	d := testenv.Models(t)
	for _, name := range []string{"llama-2-tiny-random.gguf", "mnist-8_cntk.onnx", "tok512.bin", "tok512.model", "README.md"} {
		p := filepath.Join(d, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if Sniff(b[:min(len(b), 256)]) || SniffFile(p) {
			t.Errorf("%s taken for a llama2.c checkpoint", name)
		}
	}
	if !SniffFile(filepath.Join(d, "stories260K.bin")) {
		t.Errorf("stories260K.bin not recognised")
	}
}

func TestLoadTokenizer(t *testing.T) {
	path, tokPath := stories(t)
	tok, err := LoadTokenizer(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 || tok.Token(259) != " t" || tok.Token(1) != "\n<s>\n" {
		t.Errorf("vocab %d bos %d eos %d, 259 %q", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.Token(259))
	}
	if all, err := LoadTokenizer(tokPath, 0); err != nil || all.VocabSize() != 512 {
		t.Errorf("vocab 0: %v", err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadModelTokenizer(tokPath, m); err != nil {
		t.Error(err)
	}

	raw, _ := os.ReadFile(tokPath)
	for _, tc := range []struct {
		name  string
		data  []byte
		vocab int
		want  string
	}{
		{"mismatch", raw, 32000, "tok512.bin: tokenizer has 512 tokens, but the model has vocab_size 32000"},
		{"truncated", raw[:len(raw)-3], 512, "tok512.bin: truncated: token 511 at byte"},
		{"cut in record", raw[:len(raw)-9], 512, "tok512.bin: truncated: token 511 at byte"},
		{"empty", nil, 512, "tok512.bin: not a llama2.c tokenizer: 0 bytes"},
		{"no tokens", raw[:4], 512, "tok512.bin: not a llama2.c tokenizer: no tokens"},
		{"negative len", append(binary.LittleEndian.AppendUint32(append([]byte{}, raw[:4]...), 0), 0xff, 0xff, 0xff, 0xff), 512,
			"tok512.bin: corrupt: token 0 at byte 4 has negative length -1"},
		{"negative max", []byte{0xff, 0xff, 0xff, 0xff}, 512, "tok512.bin: not a llama2.c tokenizer: max_token_length -1"},
	} {
		p := writeFile(t, "tok512.bin", tc.data)
		_, err := LoadTokenizer(p, tc.vocab)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	var mm *VocabMismatchError
	if _, err := LoadTokenizer(tokPath, 100); !errors.As(err, &mm) || mm.Tokens != 512 || mm.Vocab != 100 {
		t.Errorf("mismatch error %v", err)
	}

	// A model with another vocabulary: the error names both files.
	cfg := tiny
	cfg.TiedEmbeddings = true
	var buf bytes.Buffer
	if err := Write(&buf, cfg, llama.RandomWeights(cfg, 1), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	mp := writeFile(t, "tiny.bin", buf.Bytes())
	tm, err := Load(mp)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadModelTokenizer(tokPath, tm)
	if err == nil || err.Error() != tokPath+": tokenizer has 512 tokens, but "+mp+" has vocab_size 11" {
		t.Errorf("error %v", err)
	}
	if _, err := LoadTokenizer(filepath.Join(t.TempDir(), "tok.bin"), 512); err == nil || !strings.Contains(err.Error(), "tok.bin: stat: no such file") {
		t.Errorf("missing tokenizer: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	cfg := tiny
	w := llama.RandomWeights(cfg, 1)
	var buf bytes.Buffer
	bad := cfg
	bad.RopeStyle = "half"
	if err := Write(&buf, bad, w, WriteOptions{}); err == nil {
		t.Error("half RoPE accepted")
	}
	if err := Write(&buf, cfg, w, WriteOptions{Version: 1, FreqCis: true}); err == nil {
		t.Error("v1 with freq_cis accepted")
	}
	delete(w, "layers.1.attention.wv")
	if err := Write(&buf, cfg, w, WriteOptions{}); err == nil || !strings.Contains(err.Error(), `missing weight "layers.1.attention.wv"`) {
		t.Errorf("missing weight: %v", err)
	}
	w["layers.1.attention.wv"] = ir.BytesSource(make([]byte, 12))
	if err := Write(&buf, cfg, w, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "has 12 bytes") {
		t.Errorf("short weight: %v", err)
	}
}

// smallCheckpoints returns valid checkpoints of a minimal model, seeds for
// the fuzzer.
func smallCheckpoints(t testing.TB) [][]byte {
	cfg := llama.Config{Dim: 4, HiddenDim: 3, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 3, MaxSeq: 2,
		NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved"}
	var out [][]byte
	for _, shared := range []bool{true, false} {
		cfg.TiedEmbeddings = shared
		for _, o := range []WriteOptions{{Version: 1}, {FreqCis: true}, {}} {
			var buf bytes.Buffer
			if err := Write(&buf, cfg, llama.RandomWeights(cfg, 3), o); err != nil {
				t.Fatal(err)
			}
			out = append(out, buf.Bytes())
		}
	}
	return out
}

func FuzzLoad(f *testing.F) {
	for _, b := range smallCheckpoints(f) {
		f.Add(b)
	}
	f.Add(legacyHeader(64, 172, 5, 8, 4, 512, 512))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "fuzz.bin")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Open(p)
		if err != nil {
			if !strings.HasPrefix(err.Error(), p+": ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		defer c.Close()
		if !SniffFile(p) {
			t.Fatalf("Open accepts what SniffFile rejects")
		}
		total := c.Header.HeaderSize()
		for _, w := range c.Weights() {
			b, _ := w.Bytes()
			total += int64(len(b))
		}
		if c.FreqCis {
			total += c.Header.freqCisBytes()
		}
		if total != int64(len(data)) {
			t.Fatalf("weights cover %d bytes of %d", total, len(data))
		}
		if c.Header.Layers > 4 {
			return // building large modules is slow and not this parser's job
		}
		if _, err := c.Module(); err != nil {
			t.Fatalf("valid header but Module fails: %v", err)
		}
	})
}

func FuzzLoadTokenizer(f *testing.F) {
	d := testenv.Models(f)
	raw, err := os.ReadFile(filepath.Join(d, "tok512.bin"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw, 512)
	f.Add(raw[:40], 0)
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a'}, 1)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		p := filepath.Join(dir, "tok.bin")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := LoadTokenizer(p, vocab)
		if err != nil {
			if !strings.HasPrefix(err.Error(), p+": ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if vocab > 0 && tok.VocabSize() != vocab {
			t.Fatalf("vocab %d, asked %d", tok.VocabSize(), vocab)
		}
		ids := tok.Encode("héllo <0x41> wörld", true, true)
		for i, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
			if i > 0 {
				_ = tok.Piece(ids[i-1], id)
			}
		}
		_ = tok.Decode(ids)
	})
}

// FuzzEncode checks Encode on tok512 against its inverse: the raw pieces
// join back to the text (tok512 has all 256 byte tokens), and for printable
// ASCII text so do the pieces run.c prints.
func FuzzEncode(f *testing.F) {
	_, tokPath := stories(f)
	tok, err := LoadTokenizer(tokPath, 512)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "Once upon a time", "héllo wörld 日本", " x ", "\n\t", "\xff\x80", "<0x41>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, true, false)
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
		}
		ascii := true
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c > 0x7e {
				ascii = false
			}
		}
		if !ascii {
			return
		}
		var out strings.Builder
		for i := 1; i < len(ids); i++ {
			out.WriteString(tok.Piece(ids[i-1], ids[i]))
		}
		if out.String() != s {
			t.Fatalf("printed pieces of Encode(%q) = %q", s, out.String())
		}
	})
}
