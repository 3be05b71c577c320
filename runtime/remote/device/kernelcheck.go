package device

import (
	"fmt"

	"github.com/tapml/tapml/codegen/wgslfront"
	"github.com/tapml/tapml/runtime/remote/proto"
)

// CheckKernel is the device's check of a kernel's WGSL before any compiler
// sees it: wgpu aborts the process on source or an entry point that is not
// UTF-8 (a Rust panic that Go cannot recover), and naga overflows its stack
// on deep nesting. The source is parsed and type-checked by tapml's own WGSL
// front end (codegen/wgslfront: bounded size and nesting, UTF-8, the entry
// point declared, every name and type resolved), within the protocol's size
// bound. The dialect's extensions are taken only by a device that lists
// their features in info: f16 by one with shader-f16 (a vulkan server's
// device with f16, a browser's adapter with shader-f16), subgroups by one
// with subgroups (a vulkan server's device with subgroup operations).
func CheckKernel(src []byte, entry string, info proto.DeviceInfo) error {
	if len(src) == 0 || len(src) > proto.MaxSource {
		return fmt.Errorf("kernel source of %d bytes: want 1 to %d", len(src), proto.MaxSource)
	}
	if !isIdent(entry) {
		return fmt.Errorf("entry point %q is not a WGSL identifier", entry)
	}
	m, err := wgslfront.Parse(string(src), entry)
	if err != nil {
		return fmt.Errorf("kernel source: %w", err)
	}
	if m.F16 && !info.Has(proto.FeatureShaderF16) {
		return fmt.Errorf("kernel source enables f16, and this device has no %s", proto.FeatureShaderF16)
	}
	if m.Subgroups && !info.Has(proto.FeatureSubgroups) {
		return fmt.Errorf("kernel source enables subgroups, and this device has no %s", proto.FeatureSubgroups)
	}
	if m.SubgroupMatrix {
		// The protocol has no feature for them: no server offers them.
		return fmt.Errorf("kernel source enables %s (subgroup matrices), which remote devices do not offer", wgslfront.SubgroupMatrixExt)
	}
	return nil
}

func isIdent(s string) bool {
	if s == "" || len(s) > proto.MaxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != "_"
}
