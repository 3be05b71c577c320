package runtime

import (
	"fmt"

	"github.com/tapml/tapml/ir"
)

// Precision is how a target computes (--compute and --accumulate): the
// dtype float tensors are stored in on the device (activations, the KV
// cache, f32 weights), and the dtype of the accumulators of kernels that
// let it be chosen (attention's scores and softmax sum). The zero value is
// f32 for both.
type Precision struct {
	Compute    ir.DType // f32 or f16
	Accumulate ir.DType // f32 or f16
}

// F32 is the default precision.
var F32 = Precision{Compute: ir.F32, Accumulate: ir.F32}

// Normal returns p with zero fields set to f32.
func (p Precision) Normal() Precision {
	if p.Compute == ir.Invalid {
		p.Compute = ir.F32
	}
	if p.Accumulate == ir.Invalid {
		p.Accumulate = ir.F32
	}
	return p
}

// Half reports whether float tensors are stored as f16.
func (p Precision) Half() bool { return p.Compute == ir.F16 }

func (p Precision) String() string {
	p = p.Normal()
	if p.Accumulate == ir.F32 {
		return p.Compute.String()
	}
	return fmt.Sprintf("%s (accumulate %s)", p.Compute, p.Accumulate)
}

// ParsePrecisionDType parses a --compute or --accumulate value: f32 or
// f16.
func ParsePrecisionDType(s string) (ir.DType, error) {
	switch s {
	case "f32":
		return ir.F32, nil
	case "f16":
		return ir.F16, nil
	}
	return ir.Invalid, fmt.Errorf("%q: want f32 or f16", s)
}
