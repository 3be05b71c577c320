package gguf

import (
	"bytes"
	"encoding/binary"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// gpt2Alphabet is GPT-2's byte alphabet: the printable bytes of Latin-1
// stand for themselves, the others for code points from 256 on.
func gpt2Alphabet() [256]string {
	var a [256]string
	n := 0
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xa1 <= b && b <= 0xac) || (0xae <= b && b <= 0xff) {
			a[b] = string(rune(b))
		} else {
			a[b] = string(rune(256 + n))
			n++
		}
	}
	return a
}

// trainBPE learns n merges from corpus, the classic way: words (a run of
// non-space characters with the space before it) as sequences of byte
// symbols, then repeatedly the most frequent adjacent pair merged (ties to
// the smaller pair, for determinism). It returns the 256 byte tokens then
// one token per merge, and the merges as "a b".
func trainBPE(corpus string, n int) (tokens, merges []string) {
	alpha := gpt2Alphabet()
	tokens = alpha[:]
	counts := map[string]int{}
	for _, w := range regexp.MustCompile(`\s?\S+`).FindAllString(corpus, -1) {
		counts[w]++
	}
	type word struct {
		syms  []string
		count int
	}
	var words []word
	for w, c := range counts {
		var syms []string
		for i := 0; i < len(w); i++ {
			syms = append(syms, alpha[w[i]])
		}
		words = append(words, word{syms, c})
	}
	sort.Slice(words, func(i, j int) bool { return strings.Join(words[i].syms, "") < strings.Join(words[j].syms, "") })
	for len(merges) < n {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best [2]string
		bestN := 0
		for p, c := range pairs {
			if c > bestN || (c == bestN && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			break
		}
		merges = append(merges, best[0]+" "+best[1])
		tokens = append(tokens, best[0]+best[1])
		for k := range words {
			var out []string
			s := words[k].syms
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
				} else {
					out = append(out, s[i])
				}
			}
			words[k].syms = out
		}
	}
	return tokens, merges
}

const bpeCorpus = `Once upon a time, there was a little robot named Bolt. Bolt loved numbers: 1, 2, 3, 42 and 1234567.
"It's a wonderful day," said the robot. "They'll come soon, won't they? I'm sure we'd agree."
The robot's friend, a cat called Café, didn't care about numbers; she liked naïve poems and 日本語 songs.
    Indented lines, tabs	and  double  spaces appear too.

New paragraphs start after blank lines. THE END? Not yet!!! ... (parentheses) [brackets] {braces} <angles>`

// bpeTexts are what both tokenizers encode: contractions in both cases,
// digit runs, runs of spaces, tabs and newlines, non-ASCII letters,
// emoji (bytes with no merges), punctuation runs, control tokens in text.
var bpeTexts = []string{
	"Hello world! It's a test: they'll say \"don't\" -- or WON'T?",
	"numbers 1234567 and 3.14159, 2024-12-02, 42x",
	"  leading spaces\n\nnew  lines\t\ttabs   \n  \n",
	"naïve café, 日本語のテキスト, emoji 🙂👍 ok",
	"The robot's friend, a cat called Café, didn't care about numbers.",
	"<|im_start|>user\nOnce upon a time<|im_end|>\n",
	"a",
	"",
	bpeCorpus,
}

// TestBPETokenizerAgainstLlamaCpp writes GGUF files with a byte-level BPE
// ("gpt2") tokenizer, learned here from a small corpus, for each supported
// pre-tokenizer, and requires the ids llama.cpp's llama_tokenize gives.
func TestBPETokenizerAgainstLlamaCpp(t *testing.T) {
	tokens, merges := trainBPE(bpeCorpus, 300)
	if len(merges) < 200 {
		t.Fatalf("only %d merges learned", len(merges))
	}
	specials := []string{"<|begin_of_text|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	types := make([]any, 0, len(tokens)+len(specials))
	for range tokens {
		types = append(types, int32(1))
	}
	for range specials {
		types = append(types, int32(tokenControl))
	}
	tokens = append(tokens, specials...)
	bos, eos := len(tokens)-4, len(tokens)-3
	for _, tc := range []struct {
		pre    string
		addBOS bool
	}{{"gpt-2", false}, {"llama-bpe", true}, {"qwen2", false}} {
		t.Run(tc.pre, func(t *testing.T) {
			c := tinyConfig
			c.Vocab = len(tokens)
			lf := llamaFile{c: c, ctx: 64, typeOf: func(string) GGMLType { return GGMLF32 }, extraKVs: []wkv{
				{"tokenizer.ggml.model", TypeString, "gpt2"},
				{"tokenizer.ggml.pre", TypeString, tc.pre},
				{"tokenizer.ggml.tokens", TypeArray, warr{TypeString, anys(tokens)}},
				{"tokenizer.ggml.token_type", TypeArray, warr{TypeInt32, types}},
				{"tokenizer.ggml.merges", TypeArray, warr{TypeString, anys(merges)}},
				{"tokenizer.ggml.bos_token_id", TypeUint32, uint32(bos)},
				{"tokenizer.ggml.eos_token_id", TypeUint32, uint32(eos)},
				{"tokenizer.ggml.add_bos_token", TypeBool, tc.addBOS},
			}}
			p := writeTemp(t, "bpe.gguf", lf.writer().bytes())
			want := llamaCppTokenize(t, p, bpeTexts)
			_, tok, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range bpeTexts {
				got := tok.Encode(text, true, false)
				if !cmp.Equal(got, want[i], cmpopts.EquateEmpty()) {
					t.Errorf("%q:\n ours      %v\n llama.cpp %v", text, got, want[i])
				}
				if strings.Contains(text, "<|") {
					continue
				}
				ids := got
				if tc.addBOS && len(ids) > 0 {
					ids = ids[1:]
				}
				if back := tok.Decode(ids); back != text {
					t.Errorf("Decode(Encode(%q)) = %q", text, back)
				}
			}
			if tok.EOS() != eos || (tc.addBOS && tok.BOS() != bos) || (!tc.addBOS && tok.BOS() != -1) {
				t.Errorf("BOS %d EOS %d, want %d (added: %v) and %d", tok.BOS(), tok.EOS(), bos, tc.addBOS, eos)
			}
		})
	}
}

// llamaCppTokenize returns llama.cpp's ids of each text.
func llamaCppTokenize(t *testing.T, path string, texts []string) [][]int {
	t.Helper()
	var in bytes.Buffer
	for _, s := range texts {
		in.WriteString(s)
		in.WriteByte(0)
	}
	cmd := exec.Command(harness(t, "llamalogits"), llamaLibs(t), path, "tokenize")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama.cpp tokenize: %v\n%s", err, stderr.String())
	}
	var ids [][]int
	for len(out) >= 4 {
		n := int(int32(binary.LittleEndian.Uint32(out)))
		out = out[4:]
		if n < 0 || len(out) < 4*n {
			t.Fatalf("llama.cpp tokenize: bad output")
		}
		row := make([]int, n)
		for i := range row {
			row[i] = int(int32(binary.LittleEndian.Uint32(out[4*i:])))
		}
		ids = append(ids, row)
		out = out[4*n:]
	}
	if len(ids) != len(texts) {
		t.Fatalf("llama.cpp tokenized %d texts of %d", len(ids), len(texts))
	}
	return ids
}

// anys returns ss as the items of a warr.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// A SentencePiece file prepends BOS unless tokenizer.ggml.add_bos_token
// says not to, as llama.cpp does; generation ends at its EOS and EOT ids.
// (Only BOS is compared: run.c's and llama.cpp's SentencePiece spell the
// dummy prefix differently in a vocabulary without "▁".)
func TestSentencePieceBOSAndEOG(t *testing.T) {
	for _, add := range []any{nil, false, true} {
		kvs := []wkv{{"tokenizer.ggml.eot_token_id", TypeUint32, uint32(7)}}
		if add != nil {
			kvs = append(kvs, wkv{"tokenizer.ggml.add_bos_token", TypeBool, add})
		}
		lf := llamaFile{c: smallConfig, ctx: 64, vocab: testVocab(smallConfig.Vocab), extraKVs: kvs}
		p := writeTemp(t, "spm.gguf", lf.writer().bytes())
		want := llamaCppTokenize(t, p, []string{"A"})[0]
		_, tok, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		got := tok.Encode("A", true, false)
		if (got[0] == 1) != (want[0] == 1) || (tok.BOS() == 1) != (want[0] == 1) {
			t.Errorf("add_bos_token %v: ours %v (BOS %d), llama.cpp %v", add, got, tok.BOS(), want)
		}
		if !tok.IsEOG(2) || !tok.IsEOG(7) || tok.IsEOG(1) {
			t.Errorf("add_bos_token %v: EOG 1 %v 2 %v 7 %v, want 2 and 7", add, tok.IsEOG(1), tok.IsEOG(2), tok.IsEOG(7))
		}
	}
}
