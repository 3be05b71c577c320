package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
)

// quantizeFlag is --quantize: the storage dtype a model's matrices get
// when it is loaded.
type quantizeFlag struct{ name string }

func (q *quantizeFlag) register(f *pflag.FlagSet) {
	f.StringVar(&q.name, "quantize", "", "store the model's matrices as Q4_0, Q8_0 or Q4_K (ggml's block formats, quantized bit for bit as ggml does) or F16; "+
		"MLC's q4f16_1 and q4f32_1 (Q4_0 weights), q0f16 (F16) and q0f32 (as stored) name only the weights here (compute stays f32)")
}

// apply re-encodes the model's weights as --quantize says and reports
// what it did on stderr.
func (q *quantizeFlag) apply(model *frontend.Model) error {
	if q.name == "" {
		return nil
	}
	choice, err := passes.ParseQuantization(q.name)
	if err != nil {
		return fmt.Errorf("--quantize: %w", err)
	}
	if choice.Compute == "f16" {
		fmt.Fprintf(os.Stderr, "--quantize %s: its weights are %s; compute stays f32\n", choice.Name, dtypeName(choice.Weights))
	}
	if choice.Weights == ir.Invalid {
		return nil
	}
	st, err := passes.Quantize(model.Module, choice.Weights)
	if err != nil {
		return fmt.Errorf("%s: --quantize %s: %w", model.Path, q.name, err)
	}
	fmt.Fprintf(os.Stderr, "quantized %d weights to %s: %s -> %s", st.Weights, choice.Weights, mib(st.BytesBefore), mib(st.BytesAfter))
	if st.Kept > 0 {
		fmt.Fprintf(os.Stderr, " (%d matrices kept: read by other ops, or rows not whole blocks)", st.Kept)
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

func dtypeName(dt ir.DType) string {
	if dt == ir.Invalid {
		return "as stored"
	}
	return dt.String()
}

// mib formats a byte count.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// reportMemory writes, for run -v, the weight bytes uploaded to the
// device (by storage dtype) and the device's buffer memory when it
// reports it.
func reportMemory(w io.Writer, exec *runtime.Executor, dev runtime.Device) {
	total, by := exec.WeightBytes(dev)
	var parts []string
	dts := make([]ir.DType, 0, len(by))
	for dt := range by {
		dts = append(dts, dt)
	}
	slices.Sort(dts)
	for _, dt := range dts {
		parts = append(parts, fmt.Sprintf("%s %s", dt, mib(by[dt])))
	}
	fmt.Fprintf(w, "weights on %s: %s (%d bytes; %s)\n", dev.Name(), mib(total), total, strings.Join(parts, ", "))
	if mr, ok := dev.(runtime.MemoryReporter); ok {
		now, peak := mr.BufferBytes()
		fmt.Fprintf(w, "device buffers: %s now, %s at peak (%d bytes)\n", mib(now), mib(peak), peak)
	}
}
