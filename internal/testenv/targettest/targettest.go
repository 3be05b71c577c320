// Package targettest opens the devices of tapml's targets for tests: each
// one once per test binary, shared by its tests, which must not Close it
// (the process's exit releases it) and must undo what they set on it.
package targettest

import (
	"sync"
	"testing"

	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/target"
)

// Local are the targets every test machine runs: the CPU reference, WebGPU
// and Vulkan on lavapipe (scripts/setup.sh installs it), and native code
// through clang-14.
var Local = []string{"cpu", "webgpu", "vulkan", "llvm"}

type opened struct {
	dev runtime.Device
	err error
}

var (
	mu   sync.Mutex
	devs = map[string]opened{}
)

// Device returns the device of target name (vulkan on wgpu's Vulkan
// backend); without one the test fails.
func Device(t testing.TB, name string) runtime.Device {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	o, ok := devs[name]
	if !ok {
		o.dev, o.err = target.Open(name, "vulkan")
		devs[name] = o
	}
	if o.err != nil {
		t.Fatalf("target %s: no device: %v (scripts/setup.sh installs lavapipe and clang-14)", name, o.err)
	}
	return o.dev
}
