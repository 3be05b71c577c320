package passes

import (
	"errors"
	"testing"
)

// FuzzParse: any text either parses to a pipeline that passes Check or
// gives one *Error; it never panics.
func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte("passes:\n  - shape_inference\n  - probe: {ops: [matmul], prov: 'x'}\n  - partition: {policy: layers, layers: \"0-2\"}\n"))
	f.Add([]byte("passes:\n  - fusion:\n      max_inputs: 99999999999999999999\n"))
	f.Add([]byte("passes: &a [*a]\n"))
	f.Add([]byte("--- \npasses: []\n--- \npasses: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T", err, err)
			}
			return
		}
		if err := p.Check(); err != nil {
			t.Fatalf("parsed pipeline fails Check: %v", err)
		}
	})
}
