package sentencepiece

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// small returns a llama2.c-shaped vocabulary: <unk>, BOS and EOS as
// llama2.c's exporter writes them, the 256 byte tokens, then merges with
// descending scores.
func small(t testing.TB, merges ...string) *Tokenizer {
	t.Helper()
	vocab := []string{"<unk>", "\n<s>\n", "\n</s>\n"}
	for b := 0; b < 256; b++ {
		vocab = append(vocab, fmt.Sprintf("<0x%02X>", b))
	}
	scores := make([]float32, len(vocab))
	for i, m := range merges {
		vocab = append(vocab, m)
		scores = append(scores, -float32(i))
	}
	tok, err := New(vocab, scores, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A vocabulary in the style of tok512: single characters and merges.
var merges = []string{" t", "he", " a", "in", " the", "an", "re", "on", " s", "er", "at", "en",
	" ", "t", "h", "e", "a", "i", "n", "r", "o", "s", "é", "日", "x", "y", "xy", "yx", "xyx"}

func pieces(tok *Tokenizer, ids []int) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tok.Token(id))
	}
	return out
}

func TestEncode(t *testing.T) {
	tok := small(t, merges...)
	for _, tc := range []struct {
		text     string
		bos, eos bool
		want     []string
	}{
		{"", false, false, nil},
		{"", true, true, []string{"\n<s>\n", "\n</s>\n"}},
		{"the", false, false, []string{" the"}},
		{"the", true, false, []string{"\n<s>\n", " the"}},
		{"the", true, true, []string{"\n<s>\n", " the", "\n</s>\n"}},
		{"then ", false, false, []string{" the", "n", " "}},
		// Not in the vocabulary: byte fallback, one token per byte of the codepoint.
		{"hé!", false, false, []string{" ", "h", "é", "<0x21>"}},
		{"ü", false, false, []string{" ", "<0xC3>", "<0xBC>"}},
		{"日本", false, false, []string{" ", "日", "<0xE6>", "<0x9C>", "<0xAC>"}},
		// Leftmost pair wins a tie in score, and merges repeat greedily.
		{"xyx", false, false, []string{" ", "xyx"}},
		{"xyxy", false, false, []string{" ", "xy", "xy"}},
		// A stray continuation byte, and more than four bytes of one codepoint.
		{"\x80t", false, false, []string{" ", "<0x80>", "t"}},
		{"\xf0\x9f\x98\x80\x80\x80", false, false, []string{" ", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "<0x80>", "<0x80>"}},
		{"a\x00b", false, false, []string{" a", "<0x00>", "<0x62>"}},
	} {
		got := pieces(tok, tok.Encode(tc.text, tc.bos, tc.eos))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Encode(%q, %v, %v) pieces (-want +got):\n%s", tc.text, tc.bos, tc.eos, diff)
		}
	}
}

func TestEncodeMergeOrder(t *testing.T) {
	// "ab" scores higher than "bc": "abc" -> "ab" "c" although "bc" exists.
	tok, err := New([]string{"<unk>", "<s>", "</s>", " ", "a", "b", "c", "ab", "bc", " ab"},
		[]float32{0, 0, 0, 0, 0, 0, 0, 5, 4, -1e10}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	// " ab" has score -1e10, which run.c's initial best_score excludes.
	if got, want := pieces(tok, tok.Encode("abc", false, false)), []string{" ", "ab", "c"}; !cmp.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestBytes(t *testing.T) {
	tok := NewBytes()
	if tok.VocabSize() != 259 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Fatalf("vocab %d bos %d eos %d", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	got := tok.Encode("hi\n", true, true)
	want := []int{1, ' ' + 3, 'h' + 3, 'i' + 3, '\n' + 3, 2}
	if !cmp.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	var out strings.Builder
	prev := 1
	for _, id := range got[1 : len(got)-1] {
		out.WriteString(tok.Piece(prev, id))
		prev = id
	}
	// The dummy-prefix space is a byte token "<0x20>", not a piece starting
	// with ' ', so run.c's rule after BOS does not strip it.
	if out.String() != " hi\n" {
		t.Errorf("pieces joined = %q", out.String())
	}
	if d := tok.Decode(got); d != "hi\n" {
		t.Errorf("Decode = %q", d)
	}
}

func TestPiece(t *testing.T) {
	vocab := []string{"<unk>", "\n<s>\n", "\n</s>\n", "<0x41>", "<0x0A>", "<0x01>", "<0xE6>", "<0x00>",
		" hello", "world", " ", "a\x00b", "\x01", "<0x41>tail", "<0xZZ>"}
	tok, err := New(vocab, make([]float32, len(vocab)), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prev, tok int
		want      string
	}{
		{1, 8, "hello"},   // leading space stripped after BOS
		{9, 8, " hello"},  // but kept elsewhere
		{1, 9, "world"},   //
		{1, 10, ""},       // " " after BOS is empty
		{3, 3, "A"},       // byte token
		{3, 4, "\n"},      // whitespace byte
		{3, 5, ""},        // control byte: safe_printf prints nothing
		{3, 6, ""},        // lone high byte: not printable in the C locale
		{3, 7, ""},        // NUL
		{3, 11, "a"},      // printf("%s") stops at NUL
		{3, 12, ""},       // a one-byte control piece
		{3, 13, "A"},      // sscanf ignores what follows the hex digits
		{3, 14, "<0xZZ>"}, // not a byte token
		{3, -1, ""},
		{3, 99, ""},
	} {
		if got := tok.Piece(tc.prev, tc.tok); got != tc.want {
			t.Errorf("Piece(%d, %d) = %q, want %q", tc.prev, tc.tok, got, tc.want)
		}
	}
}

// TestScanByte compares scanByte with glibc's sscanf(s, "<0x%02hhX>", &b);
// the expectations were printed by a C program.
func TestScanByte(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
		b  byte
	}{
		{"<0x41>", true, 65}, {"<0x4>", true, 4}, {"<0x41abc", true, 65}, {"<0xZZ>", false, 0},
		{"<0x 41>", true, 65}, {"<0x-1>", true, 255}, {"<0x+f>", true, 15}, {"<0x0x41>", true, 0},
		{"<0xa>", true, 10}, {"<0x>", false, 0}, {"<0X41>", false, 0}, {"<0x\t7f>", true, 127},
		{"<0x-ff>", true, 241}, {"<0x+>", false, 0}, {"<0x->", false, 0}, {" <0x41>", false, 0},
		{"<0x\n\n\n41>", true, 65},
	} {
		b, ok := scanByte(tc.s)
		if ok != tc.ok || b != tc.b {
			t.Errorf("scanByte(%q) = %d, %v; want %d, %v", tc.s, b, ok, tc.b, tc.ok)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		vocab    []string
		scores   []float32
		bos, eos int
		want     string
	}{
		{nil, nil, 1, 2, "empty vocabulary"},
		{[]string{"a", "b", "c"}, []float32{0, 0}, 1, 2, "3 pieces but 2 scores"},
		{[]string{"a", "b", "c"}, []float32{0, 0, 0}, 3, 2, "BOS id 3"},
		{[]string{"a", "b", "c"}, []float32{0, 0, 0}, 1, -2, "EOS id -2"},
	} {
		_, err := New(tc.vocab, tc.scores, tc.bos, tc.eos)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: error %v, want one containing %q", err, tc.want)
		}
	}
}

func TestMissingPieces(t *testing.T) {
	// No " " and no byte tokens: the dummy prefix and unknown bytes become <unk>.
	tok, err := New([]string{"<unk>", "<s>", "</s>", "a"}, make([]float32, 4), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("ab", false, false), []int{0, 3, 0}; !cmp.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

func TestDuplicatePieces(t *testing.T) {
	tok, err := New([]string{"<unk>", "<s>", "</s>", " ", "a", "a"}, make([]float32, 6), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := tok.ID("a"); id != 4 {
		t.Errorf("ID(a) = %d, want the lowest id 4", id)
	}
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", " ", "the then", "héllo wörld 日本", "\x00\xff\x80", "xyxyx", "a\nb\tc"} {
		f.Add(s)
	}
	tok := small(f, merges...)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, true, true)
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("Encode(%q): id %d out of range", s, id)
			}
			_ = tok.Piece(1, id)
		}
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		if utf8.ValidString(s) && printable(s) {
			var out strings.Builder
			for i := 1; i < len(ids)-1; i++ {
				out.WriteString(tok.Piece(ids[i-1], ids[i]))
			}
			if out.String() != s {
				t.Fatalf("pieces of Encode(%q) join to %q", s, out.String())
			}
		}
	})
}

// printable reports whether every byte of s prints through safe_printf
// even as a lone byte token: printable ASCII or whitespace.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isPrint(s[i]) && !isSpace(s[i]) {
			return false
		}
	}
	return true
}
