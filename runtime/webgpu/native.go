//go:build !js

package webgpu

// Instance and device creation, done here in C rather than through the
// binding: cogentcore/webgpu v0.23.0 mallocs the WGPUInstanceExtras of
// CreateInstance and the WGPURequiredLimitsExtras of RequestDevice without
// clearing them, so their unset fields (flags, gles3MinorVersion,
// maxNonSamplerBindings) hold whatever the allocator returns. Measured: the
// second instance of a process on the H200 machine aborted with "Unknown
// gles3 minor version". Here every struct is zeroed. The device also gets an
// uncaptured-error callback, so an error outside an error scope is recorded
// instead of aborting the process (wgpu-native's default).

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Declarations copied from wgpu-native's webgpu.h / wgpu.h (v0.19), which
// the static library linked by github.com/cogentcore/webgpu/wgpu defines.
typedef struct WGPUInstanceImpl* WGPUInstance;
typedef struct WGPUAdapterImpl* WGPUAdapter;
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef struct tapml_Chained { struct tapml_Chained const * next; uint32_t sType; } tapml_Chained;

typedef struct {
	tapml_Chained chain;
	uint32_t backends;
	uint32_t flags;
	uint32_t dx12ShaderCompiler;
	uint32_t gles3MinorVersion;
	const char * dxilPath;
	const char * dxcPath;
} tapml_InstanceExtras;
typedef struct { tapml_Chained const * nextInChain; } tapml_InstanceDescriptor;

typedef struct {
	uint32_t maxTextureDimension1D;
	uint32_t maxTextureDimension2D;
	uint32_t maxTextureDimension3D;
	uint32_t maxTextureArrayLayers;
	uint32_t maxBindGroups;
	uint32_t maxBindGroupsPlusVertexBuffers;
	uint32_t maxBindingsPerBindGroup;
	uint32_t maxDynamicUniformBuffersPerPipelineLayout;
	uint32_t maxDynamicStorageBuffersPerPipelineLayout;
	uint32_t maxSampledTexturesPerShaderStage;
	uint32_t maxSamplersPerShaderStage;
	uint32_t maxStorageBuffersPerShaderStage;
	uint32_t maxStorageTexturesPerShaderStage;
	uint32_t maxUniformBuffersPerShaderStage;
	uint64_t maxUniformBufferBindingSize;
	uint64_t maxStorageBufferBindingSize;
	uint32_t minUniformBufferOffsetAlignment;
	uint32_t minStorageBufferOffsetAlignment;
	uint32_t maxVertexBuffers;
	uint64_t maxBufferSize;
	uint32_t maxVertexAttributes;
	uint32_t maxVertexBufferArrayStride;
	uint32_t maxInterStageShaderComponents;
	uint32_t maxInterStageShaderVariables;
	uint32_t maxColorAttachments;
	uint32_t maxColorAttachmentBytesPerSample;
	uint32_t maxComputeWorkgroupStorageSize;
	uint32_t maxComputeInvocationsPerWorkgroup;
	uint32_t maxComputeWorkgroupSizeX;
	uint32_t maxComputeWorkgroupSizeY;
	uint32_t maxComputeWorkgroupSizeZ;
	uint32_t maxComputeWorkgroupsPerDimension;
} tapml_Limits;
typedef struct { tapml_Chained const * nextInChain; tapml_Limits limits; } tapml_RequiredLimits;
typedef struct { tapml_Chained const * nextInChain; const char * label; } tapml_QueueDescriptor;
typedef void (*tapml_ErrorCallback)(uint32_t type, char const * message, void * userdata);
typedef struct { tapml_Chained const * nextInChain; tapml_ErrorCallback callback; void * userdata; } tapml_UncapturedErrorCallbackInfo;
typedef struct {
	tapml_Chained const * nextInChain;
	const char * label;
	size_t requiredFeatureCount;
	uint32_t const * requiredFeatures;
	tapml_RequiredLimits const * requiredLimits;
	tapml_QueueDescriptor defaultQueue;
	void * deviceLostCallback;
	void * deviceLostUserdata;
	tapml_UncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} tapml_DeviceDescriptor;
typedef void (*tapml_RequestDeviceCallback)(uint32_t status, WGPUDevice device, char const * message, void * userdata);

WGPUInstance wgpuCreateInstance(tapml_InstanceDescriptor const * descriptor);
void wgpuAdapterRequestDevice(WGPUAdapter adapter, tapml_DeviceDescriptor const * descriptor, tapml_RequestDeviceCallback callback, void * userdata);

static WGPUInstance tapml_create_instance(uint32_t backends) {
	tapml_InstanceExtras extras;
	tapml_InstanceDescriptor desc;
	memset(&extras, 0, sizeof extras);
	extras.chain.sType = 0x00030006; // WGPUSType_InstanceExtras
	extras.backends = backends;
	desc.nextInChain = &extras.chain;
	return wgpuCreateInstance(&desc);
}

// tapml_uncaptured holds the last error that no error scope caught.
typedef struct {
	uint32_t type; // 0: none
	char message[4096];
} tapml_uncaptured;

static void tapml_uncaptured_cb(uint32_t type, char const * message, void * userdata) {
	tapml_uncaptured * u = (tapml_uncaptured *)userdata;
	if (u->type != 0) return; // keep the first
	u->type = type;
	if (message) {
		strncpy(u->message, message, sizeof u->message - 1);
		u->message[sizeof u->message - 1] = 0;
	}
}

typedef struct {
	uint32_t status; // WGPURequestDeviceStatus; 0 is success
	WGPUDevice device;
	char message[1024];
	int done;
} tapml_device_result;

static void tapml_device_cb(uint32_t status, WGPUDevice device, char const * message, void * userdata) {
	tapml_device_result * r = (tapml_device_result *)userdata;
	r->status = status;
	r->device = device;
	r->done = 1;
	if (message) {
		strncpy(r->message, message, sizeof r->message - 1);
		r->message[sizeof r->message - 1] = 0;
	}
}

static void tapml_request_device(WGPUAdapter adapter, tapml_Limits const * limits, tapml_uncaptured * u, tapml_device_result * r) {
	tapml_RequiredLimits req;
	tapml_DeviceDescriptor desc;
	memset(&req, 0, sizeof req);
	memset(&desc, 0, sizeof desc);
	req.limits = *limits;
	desc.label = "tapml";
	desc.requiredLimits = &req;
	desc.uncapturedErrorCallbackInfo.callback = tapml_uncaptured_cb;
	desc.uncapturedErrorCallbackInfo.userdata = u;
	wgpuAdapterRequestDevice(adapter, &desc, tapml_device_cb, r);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// The wgpu handle types are structs of one C pointer; these views read and
// build them (checked at init).
type cRef struct{ p unsafe.Pointer }

func init() {
	one := unsafe.Sizeof(cRef{})
	if unsafe.Sizeof(wgpu.Instance{}) != one || unsafe.Sizeof(wgpu.Adapter{}) != one ||
		unsafe.Sizeof(wgpu.Device{}) != one || unsafe.Sizeof(wgpu.ShaderModule{}) != one {
		panic("webgpu: a wgpu handle type is no longer one pointer; update native.go")
	}
}

func ref[T any](h *T) unsafe.Pointer { return (*cRef)(unsafe.Pointer(h)).p }

func wrapRef[T any](p unsafe.Pointer) *T {
	h := new(T)
	(*cRef)(unsafe.Pointer(h)).p = p
	return h
}

// createInstance creates a wgpu instance of the given backends with every
// extra field zeroed.
func createInstance(backends wgpu.InstanceBackend) (*wgpu.Instance, error) {
	p := C.tapml_create_instance(C.uint32_t(backends))
	if p == nil {
		return nil, errors.New("webgpu: wgpuCreateInstance failed")
	}
	return wrapRef[wgpu.Instance](unsafe.Pointer(p)), nil
}

// uncaptured is the record of errors no error scope caught, owned by a
// device (C memory, freed at Close).
type uncaptured struct{ p *C.tapml_uncaptured }

func newUncaptured() uncaptured {
	return uncaptured{(*C.tapml_uncaptured)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tapml_uncaptured{}))))}
}

// take returns and clears the recorded error, if any.
func (u uncaptured) take() error {
	if u.p == nil || u.p._type == 0 {
		return nil
	}
	err := fmt.Errorf("wgpu error outside an error scope: %s", C.GoString(&u.p.message[0]))
	u.p._type = 0
	return err
}

func (u uncaptured) free() {
	if u.p != nil {
		C.free(unsafe.Pointer(u.p))
	}
}

// requestDevice requests a device with the given limits from adapter.
func requestDevice(adapter *wgpu.Adapter, l wgpu.Limits, u uncaptured) (*wgpu.Device, error) {
	cl := C.tapml_Limits{
		maxTextureDimension1D:                     C.uint32_t(l.MaxTextureDimension1D),
		maxTextureDimension2D:                     C.uint32_t(l.MaxTextureDimension2D),
		maxTextureDimension3D:                     C.uint32_t(l.MaxTextureDimension3D),
		maxTextureArrayLayers:                     C.uint32_t(l.MaxTextureArrayLayers),
		maxBindGroups:                             C.uint32_t(l.MaxBindGroups),
		maxBindGroupsPlusVertexBuffers:            C.uint32_t(0xffffffff), // undefined: the default
		maxBindingsPerBindGroup:                   C.uint32_t(l.MaxBindingsPerBindGroup),
		maxDynamicUniformBuffersPerPipelineLayout: C.uint32_t(l.MaxDynamicUniformBuffersPerPipelineLayout),
		maxDynamicStorageBuffersPerPipelineLayout: C.uint32_t(l.MaxDynamicStorageBuffersPerPipelineLayout),
		maxSampledTexturesPerShaderStage:          C.uint32_t(l.MaxSampledTexturesPerShaderStage),
		maxSamplersPerShaderStage:                 C.uint32_t(l.MaxSamplersPerShaderStage),
		maxStorageBuffersPerShaderStage:           C.uint32_t(l.MaxStorageBuffersPerShaderStage),
		maxStorageTexturesPerShaderStage:          C.uint32_t(l.MaxStorageTexturesPerShaderStage),
		maxUniformBuffersPerShaderStage:           C.uint32_t(l.MaxUniformBuffersPerShaderStage),
		maxUniformBufferBindingSize:               C.uint64_t(l.MaxUniformBufferBindingSize),
		maxStorageBufferBindingSize:               C.uint64_t(l.MaxStorageBufferBindingSize),
		minUniformBufferOffsetAlignment:           C.uint32_t(l.MinUniformBufferOffsetAlignment),
		minStorageBufferOffsetAlignment:           C.uint32_t(l.MinStorageBufferOffsetAlignment),
		maxVertexBuffers:                          C.uint32_t(l.MaxVertexBuffers),
		maxBufferSize:                             C.uint64_t(l.MaxBufferSize),
		maxVertexAttributes:                       C.uint32_t(l.MaxVertexAttributes),
		maxVertexBufferArrayStride:                C.uint32_t(l.MaxVertexBufferArrayStride),
		maxInterStageShaderComponents:             C.uint32_t(l.MaxInterStageShaderComponents),
		maxInterStageShaderVariables:              C.uint32_t(l.MaxInterStageShaderVariables),
		maxColorAttachments:                       C.uint32_t(l.MaxColorAttachments),
		maxColorAttachmentBytesPerSample:          C.uint32_t(l.MaxColorAttachmentBytesPerSample),
		maxComputeWorkgroupStorageSize:            C.uint32_t(l.MaxComputeWorkgroupStorageSize),
		maxComputeInvocationsPerWorkgroup:         C.uint32_t(l.MaxComputeInvocationsPerWorkgroup),
		maxComputeWorkgroupSizeX:                  C.uint32_t(l.MaxComputeWorkgroupSizeX),
		maxComputeWorkgroupSizeY:                  C.uint32_t(l.MaxComputeWorkgroupSizeY),
		maxComputeWorkgroupSizeZ:                  C.uint32_t(l.MaxComputeWorkgroupSizeZ),
		maxComputeWorkgroupsPerDimension:          C.uint32_t(l.MaxComputeWorkgroupsPerDimension),
	}
	res := (*C.tapml_device_result)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tapml_device_result{}))))
	defer C.free(unsafe.Pointer(res))
	limits := (*C.tapml_Limits)(C.malloc(C.size_t(unsafe.Sizeof(cl))))
	defer C.free(unsafe.Pointer(limits))
	*limits = cl
	C.tapml_request_device((C.WGPUAdapter)(ref(adapter)), limits, u.p, res)
	if res.done == 0 {
		return nil, errors.New("webgpu: request device: no answer")
	}
	if res.status != 0 || res.device == nil {
		return nil, fmt.Errorf("webgpu: request device: %s", C.GoString(&res.message[0]))
	}
	return wrapRef[wgpu.Device](unsafe.Pointer(res.device)), nil
}
