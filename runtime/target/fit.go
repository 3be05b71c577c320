package target

import (
	"fmt"
	"github.com/tapml/tapml/artifact"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
)

// Fit is what FitWeights found and did.
type Fit struct {
	Device string
	Limits runtime.BufferLimits // as the device reports them
	Cap    uint64               // $TAPML_MAX_BUFFER (0: unset)
	Limit  int64                // the largest weight kept whole (0: no limit)
	Split  passes.SplitStats
}

// FitWeights splits the weights of m larger than the largest tensor dev
// holds (its buffer and binding limits, lowered to $TAPML_MAX_BUFFER when
// that is set) into shards that fit (passes.SplitWeights), so that models
// with large vocabularies run under WebGPU's per-buffer limits. Devices
// without limits (cpu, llvm) leave m as it is.
func FitWeights(m *ir.Module, dev runtime.Device) (Fit, error) {
	fit := Fit{Device: dev.Name()}
	capBytes, err := runtime.MaxBufferCap()
	if err != nil {
		return fit, err
	}
	fit.Cap = capBytes
	bl, ok := dev.(runtime.BufferLimiter)
	if !ok {
		return fit, nil
	}
	fit.Limits = bl.BufferLimits()
	fit.Limit = fit.Limits.MaxTensor
	// Devices that are not asked for the cap (vulkan, remote) are held to
	// it here; the rounding is that of the pooled allocators (the largest).
	if c := int64(devkit.LargestFitting(capBytes)); c > 0 && (fit.Limit == 0 || c < fit.Limit) {
		fit.Limit = c
	}
	if fit.Limit <= 0 {
		return fit, nil
	}
	fit.Split, err = passes.SplitWeights(m, fit.Limit)
	if err != nil {
		return fit, fmt.Errorf("fitting the weights to %s: %w", dev.Name(), err)
	}
	return fit, nil
}

// String describes the limits and the split, for run -v.
func (f Fit) String() string {
	lim := func(n uint64) string {
		if n == 0 {
			return "none reported"
		}
		return fmt.Sprintf("%d bytes", n)
	}
	s := fmt.Sprintf("%s: max buffer %s, max storage binding %s", f.Device, lim(f.Limits.MaxBuffer), lim(f.Limits.MaxBinding))
	if f.Cap > 0 {
		s += fmt.Sprintf(", capped by $%s to %d bytes", runtime.MaxBufferEnv, f.Cap)
	}
	switch {
	case f.Limit == 0:
		s += "; weights are not split"
	case f.Split.Weights == 0:
		s += fmt.Sprintf("; every weight fits in %d bytes", f.Limit)
	default:
		s += fmt.Sprintf("; split %d weights over %d bytes into %d shards (%d nodes rewritten)", f.Split.Weights, f.Limit, f.Split.Shards, f.Split.Readers)
	}
	return s
}

// CompileLimit is the largest weight kept whole when compiling for a GPU
// target without its device at hand: 128 MiB, WebGPU's default
// maxStorageBufferBindingSize (the most a page gets without asking) and
// Vulkan's guaranteed minimum of maxStorageBufferRange (2^27), within
// Metal's buffer length on every Apple GPU; lowered by $TAPML_MAX_BUFFER.
// The CPU targets have no limit (0).
func CompileLimit(target string) (int64, error) {
	capBytes, err := runtime.MaxBufferCap()
	if err != nil {
		return 0, err
	}
	switch target {
	case "cpu", "llvm":
		return 0, nil
	}
	limit := uint64(128 << 20)
	if capBytes > 0 {
		limit = min(limit, capBytes)
	}
	return int64(devkit.LargestFitting(limit)), nil
}

// ForDevice prepares m to run on dev as tapmlc run does: weights over the
// device's buffer limits split (FitWeights; before lowering, since fusion
// would hide the readers the split rewrites), then, unless m is a build
// folder's module (lowered already), the default pipeline for tgt
// (artifact.Lower). m's weights are split in place; the result is the
// module to run.
func ForDevice(m *ir.Module, dev runtime.Device, tgt string, lowered bool) (*ir.Module, Fit, error) {
	fit, err := FitWeights(m, dev)
	if err != nil || lowered {
		return m, fit, err
	}
	out, err := artifact.Lower(m, tgt, func(op ir.Op) bool { return Supports(tgt, op) })
	return out, fit, err
}
