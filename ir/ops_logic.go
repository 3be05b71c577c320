package ir

import (
	"fmt"
	"slices"
)

// Comparisons and selection. Booleans at run time are i32 tensors of 0
// and 1: GPU storage buffers hold no bool elements, so compare writes i32
// and where reads any nonzero i32 as true (frontends that have a bool
// type, such as ONNX, map it to this).

// Comparisons of compare's cmp attribute, as IEEE 754 defines them: every
// comparison with a NaN is false except ne, which is true.
var Comparisons = []string{"eq", "ne", "lt", "le", "gt", "ge"}

func init() {
	register(&OpDef{Op: OpCompare, Kind: KindElementwise, MinInputs: 2, MaxInputs: 2, Outputs: 1,
		Doc: "a cmp b elementwise (cmp: eq, ne, lt, le, gt, ge; numpy broadcasting; a and b of one dtype): " +
			"an i32 tensor of 1 where it holds, 0 elsewhere. IEEE: comparisons with NaN are false, but ne",
		Attrs: []AttrSpec{{Name: "cmp", Kind: AttrString}},
		Infer: inferCompare, Facts: moveFacts}) // comparing is exact

	register(&OpDef{Op: OpWhere, Kind: KindData, MinInputs: 3, MaxInputs: 3, Outputs: 1,
		Doc: "cond i32, a, b (numpy broadcasting over all three; a and b of one dtype): a where cond is " +
			"nonzero, b elsewhere. It selects, so it is exact",
		Infer: inferWhere, Facts: moveFacts})
}

func inferCompare(in []Type, a Attrs) ([]Type, error) {
	if !slices.Contains(Comparisons, a.String("cmp")) {
		return nil, fmt.Errorf("cmp %q is not one of %v", a.String("cmp"), Comparisons)
	}
	if in[0].DType != in[1].DType {
		return nil, fmt.Errorf("input dtypes differ: %s and %s", in[0].DType, in[1].DType)
	}
	s, err := BroadcastShapes(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	return []Type{T(I32, s)}, nil
}

func inferWhere(in []Type, _ Attrs) ([]Type, error) {
	if in[0].DType != I32 {
		return nil, fmt.Errorf("cond must be i32 (0 false, else true), got %s", in[0].DType)
	}
	if in[1].DType != in[2].DType {
		return nil, fmt.Errorf("a and b differ in dtype: %s and %s", in[1].DType, in[2].DType)
	}
	s, err := BroadcastShapes(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	if s, err = BroadcastShapes(s, in[2].Shape); err != nil {
		return nil, err
	}
	return []Type{T(in[1].DType, s)}, nil
}
