package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Weights keep the storage dtype they come in (f16, bf16, a ggml block
// format) from the file to the device, and the ops that read them
// dequantize them in registers. The Storage fact of each op says which of
// its inputs may hold such a weight; inference then sees that input as the
// f32 tensor it dequantizes to (exactly, as ggml does), so an op's other
// rules are written once, for f32. Any other reader needs an explicit
// dequantize node: no op widens a weight silently.

// StoredInput is the input of a call that reads storage dtypes, and which
// ones. Input is -1 when no input does; More lists further inputs that
// may hold the same dtypes (rms_norm_swiglu's two weights).
type StoredInput struct {
	Input  int
	More   []int
	DTypes []DType
}

// Accepts reports whether input i may hold dtype dt as a storage dtype.
func (s StoredInput) Accepts(i int, dt DType) bool {
	return s.Input >= 0 && (i == s.Input || slices.Contains(s.More, i)) && slices.Contains(s.DTypes, dt)
}

func (s StoredInput) String() string {
	if s.Input < 0 {
		return "-"
	}
	if len(s.More) == 0 {
		return "input " + strconv.Itoa(s.Input) + ": " + dtypeList(s.DTypes)
	}
	ins := []string{strconv.Itoa(s.Input)}
	for _, i := range s.More {
		ins = append(ins, strconv.Itoa(i))
	}
	return "inputs " + strings.Join(ins, ", ") + ": " + dtypeList(s.DTypes)
}

var (
	noStorage = always(StoredInput{Input: -1})
	// storageMatmul: b, the weight stored out×in (transpose_b), when a is
	// f32; its blocks then run along K, the dot products' axis.
	storageMatmul = Rule[StoredInput]{Doc: "with transpose_b and f32 a: input 1 (b) in " + dtypeList(StorageDTypes),
		Of: func(c Call) StoredInput {
			if c.Attrs.Bool("transpose_b") && len(c.In) >= 2 && c.In[0].DType == F32 {
				return StoredInput{Input: 1, DTypes: StorageDTypes}
			}
			return StoredInput{Input: -1}
		}}
	// storageGather: the table, gathered along an axis before the last
	// (whole rows of blocks); its rows come out f32.
	storageGather = Rule[StoredInput]{Doc: "along an axis before the last: input 0 (the table) in " + dtypeList(StorageDTypes) + " (rows come out f32)",
		Of: func(c Call) StoredInput {
			if len(c.In) == 2 && c.In[0].Shape.Rank() >= 2 {
				if r := c.In[0].Shape.Rank(); NormAxis(c.Attrs.Int("axis"), r) < r-1 {
					return StoredInput{Input: 0, DTypes: StorageDTypes}
				}
			}
			return StoredInput{Input: -1}
		}}
	storageDequantize = always(StoredInput{Input: 0, DTypes: StorageDTypes})
	// storageNormMatmul: w, stored out×in like matmul's transposed b, when
	// x is f32.
	storageNormMatmul = Rule[StoredInput]{Doc: "with f32 x: input 2 (w) in " + dtypeList(StorageDTypes),
		Of: func(c Call) StoredInput {
			if len(c.In) == 3 && c.In[0].DType == F32 {
				return StoredInput{Input: 2, DTypes: StorageDTypes}
			}
			return StoredInput{Input: -1}
		}}
	// storageNormQKV: the three weights, stored out×in, when x is f32.
	storageNormQKV = Rule[StoredInput]{Doc: "with f32 x: inputs 2, 3 and 4 (wq, wk, wv) in " + dtypeList(StorageDTypes),
		Of: func(c Call) StoredInput {
			if len(c.In) == 5 && c.In[0].DType == F32 {
				return StoredInput{Input: 2, More: []int{3, 4}, DTypes: StorageDTypes}
			}
			return StoredInput{Input: -1}
		}}
	// storageNormSwiGLU: both weights, stored out×in, when x is f32.
	storageNormSwiGLU = Rule[StoredInput]{Doc: "with f32 x: inputs 2 and 3 (wg, wu) in " + dtypeList(StorageDTypes),
		Of: func(c Call) StoredInput {
			if len(c.In) == 4 && c.In[0].DType == F32 {
				return StoredInput{Input: 2, More: []int{3}, DTypes: StorageDTypes}
			}
			return StoredInput{Input: -1}
		}}
)

func dtypeList(ds []DType) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ", ")
}

// readTypes returns the input types a call's inference sees: a storage
// dtype that the op accepts at an input becomes f32 there. A block format
// anywhere else is an error.
func (d *OpDef) readTypes(in []Type, a Attrs) ([]Type, error) {
	stored := slices.IndexFunc(in, func(t Type) bool { return slices.Contains(StorageDTypes, t.DType) })
	if stored < 0 {
		return in, nil
	}
	st := d.Storage.Of(Call{In: in, Attrs: a})
	read := slices.Clone(in)
	for i, t := range in {
		switch {
		case st.Accepts(i, t.DType):
			read[i] = T(F32, t.Shape)
		case t.DType.IsBlock():
			return nil, fmt.Errorf("input %d is %s, which the op does not read (its stored input: %s); dequantize it first", i, t, st)
		}
	}
	return read, nil
}
