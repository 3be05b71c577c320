package carve

import (
	"testing"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/tensor"
)

// TestCarveF16 carves stories260K under f16 compute: every case records
// compute f16 and the f16 tolerance, its f32 inputs (weights included) are
// f16 values, and the bundle replays at f16 on the reference's emulation
// (against the emulation and the f32 truth) and on the plain f32
// reference; outputs 2^-7 off (16 f16 unit roundoffs, beyond the f16 rule's
// 2u on both atol and rtol) fail the truth check.
func TestCarveF16(t *testing.T) {
	model := loadStories(t)
	rec, err := Carve(model.Module, model.Tokenizer, Options{Prompt: storiesPrompt, Steps: 6, Compute: ir.F16})
	if err != nil {
		t.Fatal(err)
	}
	b := writeOpen(t, rec, "f16")
	if dt, err := b.Compute(); err != nil || dt != ir.F16 {
		t.Fatalf("bundle compute %s, %v; want f16", dt, err)
	}
	emu := cpu.NewWith(cpu.Options{Round16: true})
	for _, c := range b.Manifest.Cases {
		if c.Compute != "f16" {
			t.Fatalf("case %s records compute %q", c.ID, c.Compute)
		}
		in, _, err := b.Tensors(c)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range in {
			if x.DType == ir.F32 && cpu.Round16(x) != x {
				t.Errorf("case %s: input %d holds values that are not f16", c.ID, i)
			}
		}
		for _, dev := range []*cpu.Device{emu, cpu.New()} {
			r := b.Replay(dev, c, c.Tolerance)
			if !r.Passed() || r.Truth == nil {
				t.Errorf("case %s (%s) on %s: %s %s (truth %v)", c.ID, c.Op, dev.Name(), r.Status(), r.Err, r.Truth)
			}
		}
		if c.Op != "matmul" {
			continue
		}
		m, err := b.Module(c)
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := b.Tensors(c)
		if err != nil {
			t.Fatal(err)
		}
		off := want[0].Clone()
		v := off.Float32s()
		for j := range v {
			v[j] *= 1 + 0x1p-7
		}
		if mt, err := truth(m, caseArgs(c, in), []*tensor.Tensor{off}, c.Tolerance); err != nil || mt.Pass() {
			t.Errorf("case %s: outputs 2^-7 off pass the truth check (%+v, %v)", c.ID, mt, err)
		}
	}
}
