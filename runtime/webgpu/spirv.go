//go:build !js

package webgpu

/*
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

// The few declarations of webgpu.h this file needs (wgpu-native's static
// library, linked by github.com/cogentcore/webgpu/wgpu, defines them).
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef struct WGPUShaderModuleImpl* WGPUShaderModule;
typedef struct WGPUChainedStruct {
	struct WGPUChainedStruct const * next;
	uint32_t sType;
} WGPUChainedStruct;
typedef struct {
	WGPUChainedStruct chain;
	uint32_t codeSize; // in 32-bit words
	uint32_t const * code;
} tapml_SPIRVDescriptor;
typedef struct {
	WGPUChainedStruct const * nextInChain;
	char const * label;
	size_t hintCount;
	void const * hints;
} tapml_ShaderModuleDescriptor;
typedef void (*tapml_ErrorCallback)(uint32_t type, char const * message, void * userdata);

WGPUShaderModule wgpuDeviceCreateShaderModule(WGPUDevice device, tapml_ShaderModuleDescriptor const * descriptor);
void wgpuDevicePushErrorScope(WGPUDevice device, uint32_t filter);
void wgpuDevicePopErrorScope(WGPUDevice device, tapml_ErrorCallback callback, void * userdata);
void wgpuShaderModuleRelease(WGPUShaderModule shaderModule);

typedef struct {
	uint32_t type; // WGPUErrorType; 0 is NoError
	char message[4096];
} tapml_error;

static void tapml_error_cb(uint32_t type, char const * message, void * userdata) {
	tapml_error * e = (tapml_error *)userdata;
	e->type = type;
	if (message) {
		strncpy(e->message, message, sizeof e->message - 1);
		e->message[sizeof e->message - 1] = 0;
	}
}

// tapml_create_spirv creates a shader module from SPIR-V words inside a
// validation error scope; the binding's own SPIR-V path passes the byte
// count where wgpu wants words.
static WGPUShaderModule tapml_create_spirv(WGPUDevice dev, uint32_t const * code, uint32_t words, tapml_error * err) {
	tapml_SPIRVDescriptor spirv;
	tapml_ShaderModuleDescriptor desc;
	memset(&spirv, 0, sizeof spirv);
	memset(&desc, 0, sizeof desc);
	spirv.chain.sType = 0x00000005; // WGPUSType_ShaderModuleSPIRVDescriptor
	spirv.codeSize = words;
	spirv.code = code;
	desc.nextInChain = &spirv.chain;
	desc.label = "spirv";
	wgpuDevicePushErrorScope(dev, 0); // WGPUErrorFilter_Validation
	WGPUShaderModule m = wgpuDeviceCreateShaderModule(dev, &desc);
	wgpuDevicePopErrorScope(dev, tapml_error_cb, err);
	if (err->type != 0 && m) {
		wgpuShaderModuleRelease(m);
		m = NULL;
	}
	return m;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// CreateShaderModuleSPIRV creates a shader module from SPIR-V words (the
// first must be the magic number 0x07230203). wgpu validates the module
// (through naga) and the error comes back as a Go error. The caller
// releases the module.
func (d *Device) CreateShaderModuleSPIRV(words []uint32) (*wgpu.ShaderModule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("webgpu: device is closed")
	}
	return d.spirvModule(words)
}

func (d *Device) spirvModule(words []uint32) (*wgpu.ShaderModule, error) {
	if len(words) < 5 || words[0] != 0x07230203 {
		return nil, errors.New("not a SPIR-V module (bad magic number or too short)")
	}
	code := C.malloc(C.size_t(4 * len(words)))
	defer C.free(code)
	copy(unsafe.Slice((*uint32)(code), len(words)), words)
	var cerr C.tapml_error
	m := C.tapml_create_spirv(C.WGPUDevice(ref(d.dev)), (*C.uint32_t)(code), C.uint32_t(len(words)), &cerr)
	if cerr._type != 0 || m == nil {
		return nil, fmt.Errorf("spirv shader module: %s", C.GoString(&cerr.message[0]))
	}
	return wrapRef[wgpu.ShaderModule](unsafe.Pointer(m)), nil
}

// spirvWords reads little-endian SPIR-V bytes as words.
func spirvWords(b []byte) ([]uint32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("SPIR-V of %d bytes is not whole words", len(b))
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w, nil
}
