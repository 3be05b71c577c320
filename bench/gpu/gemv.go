package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/tensor"
)

// copyBandwidth is the H200's measured copy bandwidth (bytes/s), the bound
// the tables compare with (issue 16).
const copyBandwidth = 4.27e12

// gemvModel is the shape of a decode step's GEMVs.
type gemvModel struct {
	name                      string
	hidden, ffn, q, kv, vocab int64
	layers                    int
}

var gemvModels = map[string]gemvModel{
	"tinyllama": {"tinyllama", 2048, 5632, 2048, 256, 32000, 22},
	"llama1b":   {"llama1b", 2048, 8192, 2048, 512, 128256, 16},
	"tiny":      {"tiny", 64, 160, 64, 16, 300, 2}, // for lavapipe
}

// gemvOp is one of a decode step's GEMVs as the step runs it: the fused op
// and its input types (weights in dtype dt).
type gemvOp struct {
	name  string
	op    ir.Op
	in    []ir.Type
	attrs ir.Attrs
	calls int // per decode step
}

func (m gemvModel) ops(dt ir.DType) []gemvOp {
	f := func(d ...int64) ir.Type { return ir.T(ir.F32, ir.S(d...)) }
	w := func(n, k int64) ir.Type { return ir.T(dt, ir.S(n, k)) }
	eps := ir.Attrs{"eps": ir.FloatAttr(1e-5)}
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	h := m.hidden
	return []gemvOp{
		{"qkv", ir.OpRMSNormQKV, []ir.Type{f(1, h), f(h), w(m.q, h), w(m.kv, h), w(m.kv, h)}, eps, m.layers},
		{"o+residual", ir.OpMatmul, []ir.Type{f(1, m.q), w(h, m.q), f(1, h)}, tb, m.layers},
		{"swiglu", ir.OpRMSNormSwiGLU, []ir.Type{f(1, h), f(h), w(m.ffn, h), w(m.ffn, h)}, eps, m.layers},
		{"down+residual", ir.OpMatmul, []ir.Type{f(1, m.ffn), w(h, m.ffn), f(1, h)}, tb, m.layers},
		{"classifier", ir.OpRMSNormMatmul, []ir.Type{f(1, h), f(h), w(m.vocab, h)}, eps, 1},
	}
}

// bytes is what the op must read and write at least: its inputs and
// outputs.
func (o gemvOp) bytes(outs []ir.Type) int64 {
	var b int64
	for _, t := range append(append([]ir.Type{}, o.in...), outs...) {
		b += t.Bytes()
	}
	return b
}

// randomStored is a tensor of type t with random contents that decode to
// moderate values: f32 in [-1, 1), f16 in ±[1/8, 1/2), blocks with a scale of 1/64 and
// random quants.
func randomStored(r *rand.Rand, t ir.Type) (*tensor.Tensor, error) {
	shape := t.Shape.Sizes()
	raw := make([]byte, t.Bytes())
	switch {
	case t.DType == ir.F32:
		for i := 0; i < len(raw); i += 4 {
			binary.LittleEndian.PutUint32(raw[i:], math.Float32bits(float32(2*r.Float64()-1)))
		}
	case t.DType == ir.F16:
		for i := 0; i < len(raw); i += 2 {
			// random sign and mantissa, exponent 12 or 13: ±[1/8, 1/2)
			binary.LittleEndian.PutUint16(raw[i:], uint16(r.Uint32())&0x87ff|0x3000)
		}
	case t.DType == ir.Q4_0 || t.DType == ir.Q8_0:
		_, bs := t.DType.Block()
		for i := 0; i < len(raw); i += bs {
			binary.LittleEndian.PutUint16(raw[i:], 0x2400) // 1/64
			for j := i + 2; j < i+bs; j++ {
				raw[j] = byte(r.Uint32())
			}
		}
	default:
		return nil, fmt.Errorf("gemv: no random data for %s", t.DType)
	}
	return tensor.FromBytes(t.DType, shape, raw)
}

// gemvResult is one variant's times on one op.
type gemvResult struct {
	variant    string
	chain, b2b time.Duration // per call: dependent (a barrier before each), back to back
	barriers   float64       // per call in the chain
	relErr     float64       // against the first variant's output
	err        string
}

// gemvCmd measures the decode GEMVs under each wgsl.GEMVVariants on the
// vulkan device with GPU timestamps.
func gemvCmd(args []string) error {
	fs := flag.NewFlagSet("gemv", flag.ExitOnError)
	models := fs.String("models", "tinyllama,llama1b", "shapes: tinyllama, llama1b, tiny (small, for lavapipe)")
	types := fs.String("types", "F32,F16,Q4_0,Q8_0", "weight dtypes")
	reps := fs.Int("reps", 200, "calls timed per variant, in a chain and back to back")
	out := fs.String("o", "", "markdown output file (default stdout)")
	fs.Parse(args)
	if *reps < 1 {
		return fmt.Errorf("gemv: -reps must be positive")
	}
	var ms []gemvModel
	for _, n := range strings.Split(*models, ",") {
		m, ok := gemvModels[n]
		if !ok {
			return fmt.Errorf("gemv: unknown model shape %q (tinyllama, llama1b, tiny)", n)
		}
		ms = append(ms, m)
	}
	var dts []ir.DType
	for _, name := range strings.Split(*types, ",") {
		dt, err := ir.ParseDType(strings.ToLower(name))
		if err != nil || dt != ir.F32 && dt != ir.F16 && dt != ir.Q4_0 && dt != ir.Q8_0 {
			return fmt.Errorf("gemv: -types: %q is not one of F32, F16, Q4_0, Q8_0", name)
		}
		dts = append(dts, dt)
	}
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	dev, err := vulkan.Open(vulkan.Options{Generate: spirv.Generate})
	if err != nil {
		return err
	}
	defer dev.Close()
	base := dev.Tuning()
	fmt.Fprintf(w, "# Decode GEMV variants on %s\n\n", dev.Name())
	fmt.Fprintf(w, "Each op as the decode step runs it (one token), weights random. us/call: GPU timestamps per\n"+
		"call over %d calls, \"chain\" with a barrier before each (as in the step: launch and barrier\n"+
		"included), \"b2b\" back to back without barriers. GB/s and bound: the op's bytes (weights,\n"+
		"activations, outputs) over the chain's time, and that over %.2f TB/s. The base tuning is the\n"+
		"device's: %s. * marks the fastest chain.\n\n", *reps, copyBandwidth/1e12, orDash(wgsl.GEMVString(base)))
	variants := wgsl.GEMVVariants()
	// Per variant: the sum over shapes and dtypes of its step time over
	// the default's, for one tuning that suits them all.
	overall := make([]float64, len(variants))
	for _, m := range ms {
		for _, dt := range dts {
			// Per variant: the time of one decode step's GEMVs.
			step := make([]time.Duration, len(variants))
			failed := make([]bool, len(variants))
			for _, o := range m.ops(dt) {
				logf("gemv: %s %s %s", m.name, dt, o.name)
				res, bytes, err := measureGEMVOp(dev, base, variants, o, *reps)
				if err != nil {
					return fmt.Errorf("gemv: %s %s %s: %w", m.name, dt, o.name, err)
				}
				writeGEMVTable(w, fmt.Sprintf("%s %s %s", m.name, dt, o.name), res, bytes)
				for i, r := range res {
					step[i] += time.Duration(o.calls) * r.chain
					failed[i] = failed[i] || r.err != ""
				}
			}
			best := -1
			for i := range variants {
				if failed[i] {
					overall[i] = math.Inf(1)
				} else {
					overall[i] += float64(step[i]) / float64(max(step[0], 1))
				}
				if !failed[i] && (best < 0 || step[i] < step[best]) {
					best = i
				}
			}
			if best >= 0 {
				fmt.Fprintf(w, "**%s %s**: the step's GEMVs take %.1f us under the default, %.1f us under the best, %s\n"+
					"(set it in wgsl.DiscreteTuning, codegen/wgsl/wgsl.go).\n\n", m.name, dt,
					us(step[0]), us(step[best]), "`"+variants[best].Name()+"`")
			}
		}
	}
	best := 0
	for i, o := range overall {
		if o < overall[best] {
			best = i
		}
	}
	fmt.Fprintf(w, "**Overall** (the least sum over shapes and dtypes of the step's GEMV time relative to the default's):\n"+
		"`%s`, %.3f of the default on average. Set those fields in wgsl.DiscreteTuning (codegen/wgsl/wgsl.go);\n"+
		"GEMVUnroll, GEMVChunk, GEMVStageA and GEMVNoStage change the webgpu target's kernels too.\n", variants[best].Name(),
		overall[best]/max(overall[0], 1e-30))
	return nil
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// measureGEMVOp times op o under every variant (over base).
func measureGEMVOp(dev *vulkan.Device, base wgsl.Tuning, variants []wgsl.GEMVVariant, o gemvOp, reps int) ([]gemvResult, int64, error) {
	outs, attrs, err := ir.InferTypes(o.op, o.in, o.attrs)
	if err != nil {
		return nil, 0, err
	}
	n := &ir.Node{ID: 1, Op: o.op, Attrs: attrs, Prov: "bench.gemv"}
	for i, t := range o.in {
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprintf("x%d", i), Type: t})
	}
	for i, t := range outs {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprintf("y%d", i), Type: t, Def: n})
	}
	r := rand.New(rand.NewPCG(1, 2))
	var bufs []*runtime.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	for _, t := range o.in {
		x, err := randomStored(r, t)
		if err != nil {
			return nil, 0, err
		}
		b, err := dev.Upload(x)
		if err != nil {
			return nil, 0, err
		}
		bufs = append(bufs, b)
	}
	defer dev.SetTuning(base)
	var ref []float32
	var res []gemvResult
	for _, v := range variants {
		tu := base
		v.Apply(&tu)
		dev.SetTuning(tu)
		g := timeGEMV(dev, n, bufs, outs, &ref, reps)
		g.variant = v.Name()
		res = append(res, g)
	}
	return res, o.bytes(outs), nil
}

// timeGEMV checks node n's first output against ref (setting it when
// empty) and times reps calls of n in a chain and back to back.
func timeGEMV(dev *vulkan.Device, n *ir.Node, in []*runtime.Buffer, outs []ir.Type, ref *[]float32, reps int) (g gemvResult) {
	fail := func(err error) gemvResult { g.err = err.Error(); return g }
	launch := func() ([]*runtime.Buffer, error) { return dev.Launch(n, in, outs) }
	free := func(bs []*runtime.Buffer) {
		for _, b := range bs {
			dev.Free(b)
		}
	}
	y, err := launch() // compiles, and the check
	if err != nil {
		return fail(err)
	}
	t, err := dev.Download(y[0])
	free(y)
	if err != nil {
		return fail(err)
	}
	got := t.Float32s()
	if *ref == nil {
		*ref = got
	}
	var num, den float64
	for i, v := range got {
		d := float64(v) - float64((*ref)[i])
		num += d * d
		den += float64((*ref)[i]) * float64((*ref)[i])
	}
	g.relErr = math.Sqrt(num / max(den, 1e-30))
	if !(g.relErr < 1e-4) {
		return fail(fmt.Errorf("relative error %.3g against the default", g.relErr))
	}
	// Chain: each call's outputs freed at once, so the next call writes the
	// same memory and waits behind a barrier (counted, to be sure).
	run := func(chain bool) (time.Duration, error) {
		if err := dev.Profile(true); err != nil {
			return 0, err
		}
		defer dev.Profile(false)
		var keep []*runtime.Buffer
		for range reps {
			y, err := launch()
			if err != nil {
				return 0, err
			}
			if chain {
				free(y)
			} else {
				keep = append(keep, y...)
			}
		}
		if err := dev.Sync(); err != nil {
			return 0, err
		}
		free(keep)
		ks, _ := dev.Profiled()
		var sum time.Duration
		calls := 0
		for _, k := range ks {
			if k.Name != "copy" {
				sum += k.Time
				calls += k.Calls
			}
		}
		if calls != reps {
			return 0, fmt.Errorf("%d commands timed, want %d", calls, reps)
		}
		return sum / time.Duration(calls), nil
	}
	b0 := dev.Stats().Barriers
	if g.chain, err = run(true); err != nil {
		return fail(err)
	}
	g.barriers = float64(dev.Stats().Barriers-b0) / float64(reps)
	if g.b2b, err = run(false); err != nil {
		return fail(err)
	}
	return g
}

func writeGEMVTable(w io.Writer, title string, res []gemvResult, bytes int64) {
	best := -1
	for i, r := range res {
		if r.err == "" && (best < 0 || r.chain < res[best].chain) {
			best = i
		}
	}
	fmt.Fprintf(w, "## %s (%.2f MB)\n\n", title, float64(bytes)/1e6)
	fmt.Fprintf(w, "| variant | us/call chain | us/call b2b | GB/s | of bound | barriers/call |\n|---|---:|---:|---:|---:|---:|\n")
	for i, r := range res {
		mark := ""
		if i == best {
			mark = " *"
		}
		if r.err != "" {
			fmt.Fprintf(w, "| %s | failed: %s | | | | |\n", r.variant, r.err)
			continue
		}
		gbs := float64(bytes) / r.chain.Seconds() / 1e9
		fmt.Fprintf(w, "| %s%s | %.2f | %.2f | %.0f | %.2f | %.2f |\n", r.variant, mark, us(r.chain), us(r.b2b),
			gbs, gbs*1e9/copyBandwidth, r.barriers)
	}
	fmt.Fprintln(w)
}
