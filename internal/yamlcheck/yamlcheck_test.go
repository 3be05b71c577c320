package yamlcheck

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	nestedMap := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat(" ", i) + "a:\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, doc string
		want      string // "" for accepted
	}{
		{"pipeline", "passes:\n  - shape_inference\n  - fusion:\n      max_inputs: 4\n", ""},
		{"flow at the bound", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), ""},
		{"brackets in quotes", "a: '[[[[" + strings.Repeat("[", 200) + "'\nb: \"{{\\\"" + strings.Repeat("{", 200) + "\"\n", ""},
		{"brackets in comments", "# " + strings.Repeat("[", 200) + "\na: 1\n", ""},
		{"deep flow", "x: " + strings.Repeat("[", 100000), ":1: nested more than 64"},
		{"deep flow on line 3", "a: 1\nb: 2\nc: " + strings.Repeat("{a: ", 70), ":3: nested more than 64"},
		{"compact dashes", strings.Repeat("- ", 65) + "x\n", ":1: nested more than 64"},
		{"deep indentation", nestedMap(300), ":258: indented more than 256"},
		{"too big", strings.Repeat("a", 101), "101 bytes, more than the 100"},
	} {
		max := 1 << 20
		if tc.name == "too big" {
			max = 100
		}
		err := Check("f.yaml", []byte(tc.doc), max)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "f.yaml"+tc.want) && !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Check never panics, and never accepts a document over the size bound.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("passes:\n  - dce\n"))
	f.Add([]byte("a: [b, {c: 'd[', e: \"f\\\"{\"}] # [\n- - x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = Check("f", data, 1<<20)
		if len(data) > 16 && Check("f", data, 16) == nil {
			t.Errorf("a document of %d bytes passed a bound of 16", len(data))
		}
	})
}
