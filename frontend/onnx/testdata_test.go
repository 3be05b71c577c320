package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
	"google.golang.org/protobuf/proto"
)

// Debian's libonnx-testdata: ONNX's per-operator test cases (a model of one
// op, inputs and expected outputs as TensorProto files).
const nodeCases = "/usr/share/libonnx-testdata/data/node"

// Tolerance of the node cases, as ONNX's backend test runner: |got - want|
// <= atol + rtol·|want| with rtol 1e-3; atol 1e-5 (the runner's 1e-7 is
// below what f32 arithmetic in another order reaches near zero).
const nodeRTol, nodeATol = 1e-3, 1e-5

// staticInputs are the inputs, by op, whose values tapml needs at import
// (shapes, axes, scales). Node cases feed them as graph inputs; the test
// freezes them into initializers, as a deployment with fixed shapes does.
var staticInputs = map[string][]int{
	"Reshape": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1}, "Unsqueeze": {1},
	"ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "Resize": {1, 2, 3}, "Upsample": {1},
	"Pad": {1, 2, 3}, "ConstantOfShape": {0}, "Expand": {1}, "Tile": {1}, "Range": {0, 1, 2},
	"Loop": {0, 1},                       // the trip count and the first condition: loops are unrolled
	"RNN":  {4}, "GRU": {4}, "LSTM": {4}, // sequence lengths: the sequences are unrolled
}

// byDesign lists the cases that run but fall outside what tapml defines,
// with the reason.
var byDesign = map[string]string{
	"gather_negative_indices": "negative indices computed at run time (ids must be in [0, dim); constant ones are normalized at import)",
}

type nodeResult struct {
	name, op, status, why string // status: pass, fail, unsupported
}

// nodeOps are the op types of a case's graph.
func nodeOps(mp *onnxpb.ModelProto) []string {
	var ops []string
	for _, n := range mp.GetGraph().GetNode() {
		if !slices.Contains(ops, n.GetOpType()) {
			ops = append(ops, n.GetOpType())
		}
	}
	return ops
}

// runNodeCase imports one case and runs it on dev.
func runNodeCase(dir string, mp *onnxpb.ModelProto, data []byte, dev runtime.Device) nodeResult {
	res := nodeResult{name: strings.TrimPrefix(filepath.Base(dir), "test_")}
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		res.status, res.why = "unsupported", "no test data"
		return res
	}
	inits := map[string]bool{}
	for _, t := range mp.GetGraph().GetInitializer() {
		inits[t.GetName()] = true
	}
	var inNames []string
	for _, in := range mp.GetGraph().GetInput() {
		if !inits[in.GetName()] {
			inNames = append(inNames, in.GetName())
		}
	}
	read := func(path string) (*tensor.Tensor, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		tp := &onnxpb.TensorProto{}
		if err := proto.Unmarshal(b, tp); err != nil {
			return nil, err
		}
		return decodeTensor(tp, "")
	}
	set := sets[0]
	static := map[string]bool{}
	for _, n := range mp.GetGraph().GetNode() {
		for _, k := range staticInputs[n.GetOpType()] {
			if k < len(n.GetInput()) {
				static[n.GetInput()[k]] = true
			}
		}
	}
	var ins []*tensor.Tensor
	opts := Options{Shapes: map[string][]int64{}}
	var frozen []string
	for k, name := range inNames {
		if mp.GetGraph().GetInput()[k].GetType().GetTensorType() == nil {
			res.status, res.why = "unsupported", fmt.Sprintf("input %q is not a tensor (a sequence or optional)", name)
			return res
		}
		path := filepath.Join(set, fmt.Sprintf("input_%d.pb", k))
		if static[name] {
			b, err := os.ReadFile(path)
			tp := &onnxpb.TensorProto{}
			if err == nil {
				err = proto.Unmarshal(b, tp)
			}
			if err != nil {
				res.status, res.why = "fail", "input: "+err.Error()
				return res
			}
			tp.Name = proto.String(name)
			mp.Graph.Initializer = append(mp.Graph.Initializer, tp)
			frozen = append(frozen, name)
			continue
		}
		x, err := read(path)
		if err != nil {
			res.status, res.why = "unsupported", "input: "+err.Error()
			return res
		}
		if x.DType == ir.I64 || x.DType == ir.Bool { // both i32 at run time
			if x, err = toI32(x); err != nil {
				res.status, res.why = "unsupported", "input: "+err.Error()
				return res
			}
		}
		opts.Shapes[name] = toInt64(x.Shape)
		ins = append(ins, x)
	}
	if len(frozen) > 0 {
		var err error
		if data, err = proto.Marshal(mp); err != nil {
			res.status, res.why = "fail", err.Error()
			return res
		}
	}
	m, err := Parse(res.name, data, opts)
	if err != nil {
		res.status, res.why = "unsupported", err.Error()
		return res
	}
	for k, p := range m.Funcs[0].Params {
		if (p.Type.DType == ir.BF16 || p.Type.DType == ir.F16) && ins[k].DType == ir.I32 {
			// 16-bit floats stored as their bits (uint16)
			x := tensor.New(p.Type.DType, ins[k].Shape)
			for i, v := range ins[k].Int32s() {
				binary.LittleEndian.PutUint16(x.Data[2*i:], uint16(v))
			}
			ins[k] = x
		}
	}
	if dev != cpuDev && uses16(m) {
		res.status, res.why = "unsupported", "f16/bf16 tensors (the webgpu target computes on f32 and i32)"
		return res
	}
	got, err := runErr(m, dev, ins...)
	if why, ok := byDesign[res.name]; ok {
		res.status, res.why = "unsupported", why
		return res
	}
	if err != nil {
		res.status, res.why = "fail", err.Error()
		return res
	}
	for k := range got {
		want, err := read(filepath.Join(set, fmt.Sprintf("output_%d.pb", k)))
		if err != nil {
			res.status, res.why = "fail", "expected output: "+err.Error()
			return res
		}
		if !slices.Equal(want.Shape, got[k].Shape) {
			res.status, res.why = "fail", fmt.Sprintf("output %d is %v, want %v", k, got[k].Shape, want.Shape)
			return res
		}
		bits := (got[k].DType == ir.BF16 || got[k].DType == ir.F16) && want.DType == ir.I32
		for i := 0; i < want.NumElements(); i++ {
			w, g := want.Float64At(i), got[k].Float64At(i)
			if bits { // expected 16-bit floats stored as their bits (uint16)
				g = float64(binary.LittleEndian.Uint16(got[k].Data[2*i:]))
			}
			if w == g || math.IsNaN(w) && math.IsNaN(g) || math.Abs(w-g) <= nodeATol+nodeRTol*math.Abs(w) {
				continue
			}
			res.status, res.why = "fail", fmt.Sprintf("output %d element %d: got %g, want %g", k, i, g, w)
			return res
		}
	}
	res.status = "pass"
	return res
}

// uses16 reports whether a module's main function has f16 or bf16 values.
func uses16(m *ir.Module) bool {
	f := m.Funcs[0]
	for _, p := range f.Params {
		if p.Type.DType == ir.F16 || p.Type.DType == ir.BF16 {
			return true
		}
	}
	for _, n := range f.Nodes {
		for _, v := range append(append([]*ir.Value{}, n.Inputs...), n.Outputs...) {
			if v.Type.DType == ir.F16 || v.Type.DType == ir.BF16 {
				return true
			}
		}
	}
	return false
}

// TestNodeCases runs every libonnx-testdata case whose ops the importer
// reads, and prints a pass/fail table per op; cases that use a form of a
// supported op that tapml does not (a dtype, 3-D convolution, cubic
// resize, ...) are listed as unsupported with the reason, not skipped
// silently. No case may fail.
func TestNodeCases(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(testenv.Installed(t, nodeCases), "test_*"))
	if len(dirs) == 0 {
		t.Fatalf("no test cases in %s", nodeCases)
	}
	devs := []runtime.Device{cpuDev}
	if !testing.Short() {
		devs = append(devs, gpu(t))
	}
	supported := map[string]bool{}
	for _, op := range SupportedOps() {
		supported[op] = true
	}
	for _, dev := range devs {
		var results []nodeResult
		for _, dir := range dirs {
			data, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			if err != nil {
				continue
			}
			mp := &onnxpb.ModelProto{}
			if err := proto.Unmarshal(data, mp); err != nil {
				t.Errorf("%s: %v", dir, err)
				continue
			}
			ops := nodeOps(mp)
			ok := len(ops) > 0
			for _, op := range ops {
				ok = ok && supported[op]
			}
			if !ok {
				continue
			}
			r := runNodeCase(dir, mp, data, dev)
			r.op = strings.Join(ops, "+")
			results = append(results, r)
		}
		report(t, dev.Name(), results)
	}
}

func report(t *testing.T, dev string, results []nodeResult) {
	type row struct{ pass, fail, unsup int }
	rows := map[string]*row{}
	for _, r := range results {
		if rows[r.op] == nil {
			rows[r.op] = &row{}
		}
		switch r.status {
		case "pass":
			rows[r.op].pass++
		case "fail":
			rows[r.op].fail++
		default:
			rows[r.op].unsup++
		}
	}
	ops := make([]string, 0, len(rows))
	for op := range rows {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "libonnx-testdata node cases on %s (tolerance %g + %g·|want|):\n", dev, nodeATol, nodeRTol)
	fmt.Fprintf(&b, "%-34s %5s %5s %12s\n", "op", "pass", "fail", "unsupported")
	var tot row
	for _, op := range ops {
		r := rows[op]
		fmt.Fprintf(&b, "%-34s %5d %5d %12d\n", op, r.pass, r.fail, r.unsup)
		tot.pass, tot.fail, tot.unsup = tot.pass+r.pass, tot.fail+r.fail, tot.unsup+r.unsup
	}
	fmt.Fprintf(&b, "%-34s %5d %5d %12d\n", "total", tot.pass, tot.fail, tot.unsup)
	b.WriteString("unsupported by design:\n")
	for _, r := range results {
		if r.status == "unsupported" {
			fmt.Fprintf(&b, "  %-44s %s\n", r.name, r.why)
		}
	}
	t.Log(b.String())
	for _, r := range results {
		if r.status == "fail" {
			t.Errorf("%s (%s): %s", r.name, dev, r.why)
		}
	}
}
