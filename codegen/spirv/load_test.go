package spirv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/tapml/tapml/codegen"
)

// spirvModule makes a shader module of a SPIR-V kernel.
//
// Interim: the binding's ShaderModuleSPIRVDescriptor passes a byte count
// where wgpu wants words, so SPIR-V cannot be loaded from this package
// (a test file cannot use cgo). Until runtime/webgpu exposes its loader,
// the kernel goes through the naga CLI (SPIR-V -> WGSL) and wgpu loads the
// WGSL. This checks the kernels' semantics as naga reads them.
func spirvModule(g *gpu, k *codegen.Kernel) (*wgpu.ShaderModule, error) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		return nil, fmt.Errorf("naga CLI not installed: %w", err)
	}
	dir, err := os.MkdirTemp("", "spirv-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "k.spv"), filepath.Join(dir, "k.wgsl")
	if err := os.WriteFile(in, k.Source, 0o644); err != nil {
		return nil, err
	}
	if msg, err := exec.Command(naga, in, out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("naga: %v: %s", err, msg)
	}
	src, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return g.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: k.Name(), WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: string(src)}})
}
