package hf

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/frontend/tokenizer/bpe"
)

// byteLevelJSON is a small GPT-2-style tokenizer: ids 0..255 are the bytes
// (in GPT-2's byte alphabet, id = byte value), then the merges below, then
// <|endoftext|>.
func byteLevelJSON(t testing.TB, pre any) []byte {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[bpe.ByteChar(byte(b))] = b
	}
	merges := [][2]string{
		{"Ġ", "t"},    // 256 Ġt
		{"h", "e"},    // 257 he
		{"Ġt", "he"},  // 258 Ġthe
		{"l", "l"},    // 259 ll
		{"e", "ll"},   // 260 ell
		{"h", "ell"},  // 261 hell
		{"hell", "o"}, // 262 hello
	}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	vocab["<|endoftext|>"] = 263
	doc := map[string]any{
		"version": "1.0",
		"added_tokens": []any{map[string]any{"id": 263, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}},
		"normalizer":     nil,
		"pre_tokenizer":  pre,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var gpt2Pre = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}

func mustTokenizer(t testing.TB, data []byte) *bpe.Tokenizer {
	t.Helper()
	tok, err := ParseTokenizer("test.json", data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestByteLevelBPE(t *testing.T) {
	tok := mustTokenizer(t, byteLevelJSON(t, gpt2Pre))
	if tok.Kind() != "byte-level BPE" || tok.VocabSize() != 264 || tok.BOS() != -1 {
		t.Fatalf("kind %q, vocab %d, bos %d", tok.Kind(), tok.VocabSize(), tok.BOS())
	}
	for _, tc := range []struct {
		text string
		want []int
	}{
		// "hello": h+e (rank 1) merges before l+l (rank 3), so "hell"
		// (h + ell) can never form: he, ll, o. " the": Ġ+t, h+e, then
		// Ġt+he. " world" has no merges: Ġ is byte 32.
		{"hello the world", []int{257, 259, 111, 258, 32, 119, 111, 114, 108, 100}},
		// Two spaces before a word: \s+(?!\S) takes one, " b" the other.
		{"a  b", []int{97, 32, 32, 98}},
		{"<|endoftext|>hi", []int{263, 104, 105}},
		{"x<|endoftext|>", []int{120, 263}},
		{"", nil},
		{"é", []int{0xC3, 0xA9}},
	} {
		got := tok.Encode(tc.text, false, false)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Encode(%q) (-want +got):\n%s", tc.text, diff)
		}
	}
	if got, want := tok.Decode([]int{257, 259, 111, 258, 263, 32, 0xC3, 0xA9}), "hello the é"; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
	if p := tok.Piece(-1, 258); p != " the" {
		t.Errorf("Piece(-1, 258) = %q", p)
	}
	if p := tok.Piece(5, 263); p != "" {
		t.Errorf("a special token's piece is %q", p)
	}
	// A piece may hold part of a UTF-8 sequence; pieces concatenate to it.
	if p := tok.Piece(5, 0xC3) + tok.Piece(0xC3, 0xA9); p != "é" {
		t.Errorf("pieces of é = %q", p)
	}
}

// TestByteLevelRoundTrip: byte-level BPE encodes every byte string, valid
// UTF-8 or not, and decodes it back exactly.
func TestByteLevelRoundTrip(t *testing.T) {
	for _, pre := range []any{gpt2Pre, qwen2Pre(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`)} {
		tok := mustTokenizer(t, byteLevelJSON(t, pre))
		for _, s := range []string{
			"hello the world", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n", "日本語のテキスト 🙂👍🏽",
			"\xff\xfe invalid \xc3", "don't I'LL we've", "1234 56.78", "\x00\x01\x02", "<|endoftext|> mid <|endoftext|>",
		} {
			ids := tok.Encode(s, false, false)
			if got := tok.Decode(ids); got != strings.ReplaceAll(s, "<|endoftext|>", "") {
				t.Errorf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
			}
			var sb strings.Builder
			prev := -1
			for _, id := range ids {
				sb.WriteString(tok.Piece(prev, id))
				prev = id
			}
			if got := strings.ReplaceAll(s, "<|endoftext|>", ""); sb.String() != got {
				t.Errorf("pieces of %q = %q", s, sb.String())
			}
		}
	}
}

func qwen2Pre(regex string) any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}}
}

// spJSON is a small SentencePiece-style tokenizer: <unk> <s> </s>, the 256
// byte tokens (ids 3..258), then ▁ a b ▁a ab ▁ab.
func spJSON(t testing.TB, byteFallback bool, legacy bool) []byte {
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := 0; b < 256; b++ {
		vocab["<0x"+hex2(b)+">"] = 3 + b
	}
	for i, p := range []string{"▁", "a", "b", "▁a", "ab", "▁ab"} {
		vocab[p] = 259 + i
	}
	special := func(id int, s string) map[string]any {
		return map[string]any{"id": id, "content": s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
	}
	doc := map[string]any{
		"added_tokens": []any{special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}, "tokens": []string{"<s>"}}}},
		"model": map[string]any{"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": byteFallback,
			"vocab": vocab, "merges": []string{"▁ a", "a b", "▁a b"}},
	}
	if legacy {
		doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}}
		doc["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}}}
	} else {
		doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
		doc["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hex2(b int) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[b>>4], digits[b&15]})
}

func TestSentencePieceBPE(t *testing.T) {
	for _, legacy := range []bool{true, false} {
		tok := mustTokenizer(t, spJSON(t, true, legacy))
		if tok.BOS() != 1 || tok.EOS() != -1 || tok.Kind() != "SentencePiece BPE" {
			t.Fatalf("bos %d eos %d kind %s", tok.BOS(), tok.EOS(), tok.Kind())
		}
		for _, tc := range []struct {
			text string
			bos  bool
			want []int
		}{
			// "▁ab▁a": ▁+a (rank 0) at 0, then ▁+a at 3, then ▁a+b: ▁ab ▁a.
			{"ab a", true, []int{1, 264, 262}},
			// é is not in the vocabulary: its bytes C3 A9 as <0xC3> <0xA9>.
			{"é", false, []int{259, 3 + 0xC3, 3 + 0xA9}},
			{"", true, []int{1}},
			{"ba", false, []int{259, 261, 260}},
		} {
			if diff := cmp.Diff(tc.want, tok.Encode(tc.text, tc.bos, false)); diff != "" {
				t.Errorf("legacy=%v Encode(%q) (-want +got):\n%s", legacy, tc.text, diff)
			}
		}
		// After an added token, the legacy normalizer prepends ▁ again
		// (Hugging Face normalizes each stretch between added tokens);
		// Metaspace "first" prepends only at the start of the input.
		want := []int{262, 1, 262}
		if !legacy {
			want = []int{262, 1, 260}
		}
		if diff := cmp.Diff(want, tok.Encode("a<s>a", false, false)); diff != "" {
			t.Errorf("legacy=%v Encode(a<s>a) (-want +got):\n%s", legacy, diff)
		}
		if got := tok.Decode([]int{1, 264, 262, 259, 3 + 0xC3, 3 + 0xA9}); got != "ab a é" {
			t.Errorf("legacy=%v Decode = %q", legacy, got)
		}
		if p := tok.Piece(1, 264); p != "ab" {
			t.Errorf("legacy=%v Piece(BOS, ▁ab) = %q", legacy, p)
		}
		if p := tok.Piece(264, 262); p != " a" {
			t.Errorf("legacy=%v Piece(▁ab, ▁a) = %q", legacy, p)
		}
	}
	// Without byte fallback, unknown characters are <unk>, consecutive
	// ones fused into one.
	tok := mustTokenizer(t, spJSON(t, false, true))
	if diff := cmp.Diff([]int{259, 0, 260}, tok.Encode("ééa", false, false)); diff != "" {
		t.Errorf("unk (-want +got):\n%s", diff)
	}
}

func TestTokenizerErrors(t *testing.T) {
	good := string(byteLevelJSON(t, gpt2Pre))
	for _, tc := range []struct {
		name, json, err string
	}{
		{"not json", "{", "not a tokenizer.json"},
		{"no model", `{"added_tokens": []}`, `no "model"`},
		{"wordpiece", `{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`, `model type "WordPiece" is not supported (only BPE)`},
		{"unigram", `{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}`, "not a tokenizer.json"},
		{"empty vocab", `{"model": {"type": "BPE", "vocab": {}, "merges": []}}`, "empty vocab"},
		{"shared id", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}`, `tokens "a" and "b" share id 0`},
		{"negative id", `{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}`, "outside"},
		{"merge oov", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}`, `the merged token "ab" is not in the vocab`},
		{"merge form", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}}`, "not two tokens"},
		{"dropout", `{"model": {"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []}}`, "dropout"},
		{"normalizer", `{"normalizer": {"type": "BertNormalizer"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`,
			`normalizer: type "BertNormalizer" is not supported`},
		{"split regex", `{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`,
			"Split pattern"},
		{"decoder", `{"decoder": {"type": "WordPiece"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, `decoder: type "WordPiece"`},
		{"unk", `{"model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"a": 0}, "merges": []}}`, `unk_token "<unk>" is not in the vocab`},
		{"added clash", `{"added_tokens": [{"id": 0, "content": "b"}], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, "clashes"},
		{"template", `{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}]}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`,
			`token "<s>" is not in the vocabulary`},
		{"nesting", `{"normalizer": ` + strings.Repeat(`{"type": "Sequence", "normalizers": [`, 20) + strings.Repeat("]}", 20) +
			`, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, "nested too deeply"},
		{"good", good, ""},
	} {
		_, err := ParseTokenizer("tok.json", []byte(tc.json))
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "tok.json: ") {
			t.Errorf("%s: error %v, want one naming the file and saying %q", tc.name, err, tc.err)
		}
	}
}

// TestQwen2Style: an NFC normalizer, Qwen2's Split pattern with a
// byte-level pre-tokenizer without its own regex, ignore_merges, and added
// tokens with ids beyond the vocabulary that strip white space.
func TestQwen2Style(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(byteLevelJSON(t, qwen2Pre(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`)), &doc); err != nil {
		t.Fatal(err)
	}
	doc["normalizer"] = map[string]any{"type": "NFC"}
	model := doc["model"].(map[string]any)
	model["ignore_merges"] = true
	model["vocab"].(map[string]any)["hell"] = 264 // reachable only as a whole word
	doc["added_tokens"] = append(doc["added_tokens"].([]any),
		map[string]any{"id": 300, "content": "<|im_start|>", "special": true, "rstrip": true},
		map[string]any{"id": 301, "content": "<|im_end|>", "special": true, "lstrip": true},
		map[string]any{"id": 302, "content": "foo", "special": false, "single_word": true})
	data, _ := json.Marshal(doc)
	tok := mustTokenizer(t, data)
	if tok.VocabSize() != 303 || tok.Token(300) != "<|im_start|>" || !tok.IsSpecial(300) || tok.IsSpecial(302) {
		t.Fatalf("vocab %d", tok.VocabSize())
	}
	for _, tc := range []struct {
		text string
		want []int
	}{
		// NFC composes e + U+0301 into é (C3 A9).
		{"e\u0301", []int{0xC3, 0xA9}},
		// ignore_merges: "hell" is a vocabulary word, so merges are skipped;
		// "hello" is too (id 262); "the" is not and merges to t, he.
		{"hell", []int{264}},
		{"hello", []int{262}},
		{"the", []int{'t', 257}},
		// Qwen2 splits digits one by one.
		{"12", []int{'1', '2'}},
		// rstrip/lstrip: the added tokens absorb the spaces beside them.
		{"<|im_start|>  hi  <|im_end|>", []int{300, 'h', 'i', 301}},
		// single_word: foo matches only as a word of its own.
		{"foo food", []int{302, 32, 'f', 'o', 'o', 'd'}},
	} {
		if diff := cmp.Diff(tc.want, tok.Encode(tc.text, false, false)); diff != "" {
			t.Errorf("Encode(%q) (-want +got):\n%s", tc.text, diff)
		}
	}
	if got := tok.Decode([]int{300, 'h', 'i', 302, 301}); got != "hifoo" {
		t.Errorf("Decode = %q (special tokens are left out, others kept)", got)
	}
}

// TestMetaspaceSplit: Metaspace with split cuts before each ▁.
func TestMetaspaceSplit(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(spJSON(t, true, false), &doc); err != nil {
		t.Fatal(err)
	}
	doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	data, _ := json.Marshal(doc)
	tok := mustTokenizer(t, data)
	// "▁a▁b" without split would merge ▁a then stop (no "▁a▁b"); with
	// split the words are ▁a and ▁b; ▁b is not a token: ▁, b.
	if diff := cmp.Diff([]int{262, 259, 261}, tok.Encode("a b", false, false)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
