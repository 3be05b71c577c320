// Package target opens the device a target name stands for: "cpu" (the
// reference), "webgpu" (wgpu on Vulkan or GL), "vulkan" (tapml's own
// Vulkan device), "metal" (Metal on macOS;
// elsewhere Open says so), "remote:ws://HOST:PORT" (a device server started
// with `tapmlc serve`, native or a browser page), and the targets later
// issues add. It is the one place that knows every device package.
package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	codegenllvm "github.com/tapml/tapml/codegen/llvm"
	"github.com/tapml/tapml/codegen/msl"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/cpu"
	"github.com/tapml/tapml/runtime/llvm"
	"github.com/tapml/tapml/runtime/metal"
	"github.com/tapml/tapml/runtime/remote"
	"github.com/tapml/tapml/runtime/remote/proto"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/runtime/webgpu"
)

// Names lists the targets in the order `tapmlc ops` shows them.
var Names = []string{"cpu", "webgpu", "vulkan", "metal", "llvm"}

// Flags are the command-line flags that choose a target. Precision is set
// by the commands that take --compute and --accumulate; Open replaces it
// with the precision the device runs at.
type Flags struct {
	Target    string
	Backend   string
	Precision runtime.Precision
}

// Register adds --target and --backend to a flag set.
func (t *Flags) Register(f *pflag.FlagSet) {
	// No backquotes in the usage: pflag takes a quoted word for the flag's
	// type in --help ("--target tapmlc serve").
	f.StringVar(&t.Target, "target", "cpu", "where to run: "+strings.Join(Names, ", ")+", or remote:ws://HOST:PORT[?token=T] (a device server of 'tapmlc serve')")
	f.StringVar(&t.Backend, "backend", "vulkan", "graphics API of the webgpu target: vulkan or gl")
}

// Open opens the device of the chosen target at the chosen precision
// where it has it; where not, it says so on stderr and opens it at f32.
func (t *Flags) Open() (runtime.Device, error) {
	dev, p, err := OpenPrecision(t.Target, t.Backend, t.Precision, os.Stderr)
	if err == nil {
		t.Precision = p
	}
	return dev, err
}

// RemotePrefix starts the name of a remote target: remote:ws://HOST:PORT.
const RemotePrefix = "remote:"

// IsRemote reports whether target names a remote device.
func IsRemote(target string) bool { return strings.HasPrefix(target, RemotePrefix) }

// Open opens the device named by target.
func Open(target, backend string) (runtime.Device, error) {
	if IsRemote(target) {
		dev, err := openRemote(strings.TrimPrefix(target, RemotePrefix), runtime.F32)
		if err != nil {
			return nil, err // not a nil *remote.Device in an interface
		}
		return dev, nil
	}
	switch target {
	case "cpu":
		return cpu.New(), nil
	case "webgpu":
		capBytes, err := runtime.MaxBufferCap()
		if err != nil {
			return nil, err
		}
		return webgpu.Open(webgpu.Options{Backend: backend, MaxBufferBytes: capBytes})
	case "vulkan":
		return openVulkan()
	case "metal": // macOS only; elsewhere metal.ErrUnsupported
		return openMetal(runtime.F32)
	case "llvm":
		return llvm.New()
	}
	return nil, fmt.Errorf("unknown target %q (known: %s)", target, strings.Join(Names, ", "))
}

// WebGPUNoF16 says why the webgpu target computes in f32.
const WebGPUNoF16 = "this wgpu's WGSL compiler (naga) rejects `enable f16;` (runtime/webgpu's TestNoF16 measures it)"

// OpenPrecision opens the device named by target at precision p where the
// target has it, and returns the precision it runs at. f16 compute runs
// on vulkan where the device has shaderFloat16 and 16-bit storage, on
// metal (every Apple GPU has half; off macOS metal's Open fails as at
// f32), on remote where the device has shader-f16 (`tapmlc serve
// --vulkan` on such a device, a browser page whose adapter has it), and
// on cpu as the reference's emulation (cpu.Options.Round16); elsewhere
// (webgpu, llvm, a remote device without shader-f16) a line on note says
// why not and the device computes in f32 (not an error: the same command
// runs everywhere).
func OpenPrecision(target, backend string, p runtime.Precision, note io.Writer) (runtime.Device, runtime.Precision, error) {
	p = p.Normal()
	if p == runtime.F32 {
		dev, err := Open(target, backend)
		return dev, p, err
	}
	fallback := func(why string) (runtime.Device, runtime.Precision, error) {
		fmt.Fprintf(note, "%s: %s; computing in f32\n", target, why)
		dev, err := Open(target, backend)
		return dev, runtime.F32, err
	}
	switch {
	case target == "vulkan":
		dev, err := vulkan.Open(vulkan.Options{Generate: spirv.Generate, Compute: p.Compute, Accumulate: p.Accumulate})
		if errors.Is(err, vulkan.ErrNoF16) {
			return fallback(err.Error())
		}
		return dev, p, err
	case target == "cpu":
		if p.Accumulate != ir.F32 {
			fmt.Fprintf(note, "cpu: the reference emulates f16 storage, not f16 accumulation; accumulating in f32\n")
			p.Accumulate = ir.F32
		}
		return cpu.NewWith(cpu.Options{Round16: p.Half()}), p, nil
	case target == "metal":
		dev, err := openMetal(p)
		return dev, p, err
	case target == "webgpu":
		return fallback(WebGPUNoF16)
	case IsRemote(target):
		dev, err := openRemote(strings.TrimPrefix(target, RemotePrefix), p)
		if err != nil {
			return nil, p, err
		}
		if dev.Precision() != p {
			// The device's name, not target: the URL may hold a token.
			fmt.Fprintf(note, "%s: %s; computing in f32\n", dev.Name(), remoteNoF16)
		}
		return dev, dev.Precision(), nil
	case !slices.Contains(Names, target):
		dev, err := Open(target, backend) // its error names the known targets
		return dev, p, err
	}
	return fallback("f16 compute is implemented for the vulkan and metal targets and remote devices with " + proto.FeatureShaderF16 + " only")
}

// remoteNoF16 says why a remote device computes in f32: it did not list
// shader-f16 in the handshake. A WebGPU server never lists it (its naga
// rejects f16); `tapmlc serve --vulkan` lists it where its Vulkan device
// has f16 (lavapipe has), and the browser page where its adapter has
// shader-f16 (Chromium's SwiftShader, the browser of this project's
// tests, has not).
const remoteNoF16 = "the device has no " + proto.FeatureShaderF16 + " (a WebGPU server never has; `tapmlc serve --vulkan` has it where its Vulkan device has f16, a browser page where its adapter has it)"

// Supports reports whether target has a kernel for op.
func Supports(target string, op ir.Op) bool {
	if IsRemote(target) {
		return wgsl.Supports(op) // the host generates WGSL for remote devices
	}
	switch target {
	case "cpu":
		return cpu.Supports(op)
	case "webgpu":
		return wgsl.Supports(op)
	case "vulkan":
		return spirv.Supports(op)
	case "metal":
		return msl.Supports(op)
	case "llvm":
		return codegenllvm.Supports(op)
	}
	return false
}

// openVulkan opens the vulkan target: tapml's own Vulkan device
// (runtime/vulkan) running codegen/spirv's kernels (codegen/wgsl's, under
// the device's limits, tuning and features, translated to SPIR-V).
func openVulkan() (runtime.Device, error) {
	return vulkan.Open(vulkan.Options{Generate: spirv.Generate})
}

// openMetal opens the metal target at precision p.
func openMetal(p runtime.Precision) (runtime.Device, error) {
	dev, err := metal.Open(metal.Options{Compute: p.Compute, Accumulate: p.Accumulate})
	if err != nil {
		return nil, err // not a nil *metal.Device in an interface
	}
	return dev, nil
}

// openRemote connects to a device server. The URL may carry ?token=T and
// &timeout=D; without a token in the URL, $TAPML_TOKEN is used (keeping it
// out of process listings).
// It asks for precision p, which the device runs at where it has
// shader-f16 (remote.Device.Precision).
func openRemote(url string, p runtime.Precision) (*remote.Device, error) {
	return remote.DialOptions(context.Background(), url, remote.Options{Token: os.Getenv("TAPML_TOKEN"), Client: "tapmlc", Precision: p})
}
