package target

import (
	"bytes"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/metal"
)

// TestOpenPrecision checks which targets run f16 compute and that the
// others say why in one line and run f32.
func TestOpenPrecision(t *testing.T) {
	f16 := runtime.Precision{Compute: ir.F16, Accumulate: ir.F32}
	tests := []struct {
		target string
		ask    runtime.Precision
		want   runtime.Precision
		note   string // a part of the note; "" for none
	}{
		{"vulkan", f16, f16, ""},
		{"vulkan", runtime.Precision{Compute: ir.F16, Accumulate: ir.F16}, runtime.Precision{Compute: ir.F16, Accumulate: ir.F16}, ""},
		{"cpu", f16, f16, ""},
		{"cpu", runtime.Precision{Compute: ir.F16, Accumulate: ir.F16}, f16, "not f16 accumulation; accumulating in f32"},
		{"webgpu", f16, runtime.F32, "naga) rejects `enable f16;`"},
		{"llvm", f16, runtime.F32, "remote devices with shader-f16 only; computing in f32"},
		{"cpu", runtime.Precision{}, runtime.F32, ""},
	}
	for _, tc := range tests {
		var note bytes.Buffer
		dev, got, err := OpenPrecision(tc.target, "vulkan", tc.ask, &note)
		if err != nil {
			t.Errorf("%s at %s: %v", tc.target, tc.ask, err)
			continue
		}
		dev.Close()
		if got != tc.want {
			t.Errorf("%s at %s runs at %s, want %s", tc.target, tc.ask, got, tc.want)
		}
		if (tc.note == "") != (note.Len() == 0) || !strings.Contains(note.String(), tc.note) {
			t.Errorf("%s at %s: note %q, want one containing %q", tc.target, tc.ask, note.String(), tc.note)
		}
	}
	var note bytes.Buffer
	if _, _, err := OpenPrecision("nosuch", "vulkan", f16, &note); err == nil || note.Len() > 0 {
		t.Errorf("unknown target: error %v, note %q", err, note.String())
	}
	// metal takes f16 (it has no fallback note); off macOS it is metal's
	// own error, at f16 as at f32.
	if goruntime.GOOS != "darwin" {
		for _, p := range []runtime.Precision{runtime.F32, f16} {
			note.Reset()
			dev, got, err := OpenPrecision("metal", "vulkan", p, &note)
			if !errors.Is(err, metal.ErrUnsupported) || dev != nil || got != p || note.Len() > 0 {
				t.Errorf("metal at %s off macOS: %v, %v, %s, note %q; want metal.ErrUnsupported, a nil device, %s, no note", p, dev, err, got, note.String(), p)
			}
		}
	}
}
