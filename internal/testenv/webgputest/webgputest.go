// Package webgputest opens the webgpu device tests run on. It is apart from
// testenv so that tests of the packages runtime/webgpu imports can use
// testenv.
package webgputest

import (
	"sync"
	"testing"

	"github.com/tapml/tapml/runtime/webgpu"
)

var (
	once sync.Once
	dev  *webgpu.Device
	err  error
)

// Device returns a webgpu device with default options, opened once per test
// binary and shared by its tests: they must not Close it (the process's exit
// releases it) and must undo what they set on it (faults). Without a device
// the test fails: scripts/setup.sh installs lavapipe, a CPU Vulkan driver.
func Device(t testing.TB) *webgpu.Device {
	t.Helper()
	once.Do(func() { dev, err = webgpu.Open(webgpu.Options{}) })
	if err != nil {
		t.Fatalf("webgpu: no device: %v (scripts/setup.sh installs lavapipe, a CPU Vulkan driver)", err)
	}
	return dev
}
