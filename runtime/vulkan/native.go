package vulkan

// The Go side of vk.c: thin wrappers that turn VkResults into errors
// naming the call that failed.

/*
#cgo CFLAGS: -O2 -std=c11
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "vk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// loaderName is the Vulkan loader's soname (Debian's libvulkan1).
const loaderName = "libvulkan.so.1"

// errNoVulkan is wrapped by the errors of a machine without a usable
// Vulkan driver.
var errNoVulkan = errors.New("no Vulkan device")

// fixHint names the packages that provide a Vulkan loader and driver.
const fixHint = "install a Vulkan driver: apt-get install -y libvulkan1 mesa-vulkan-drivers (lavapipe runs on any CPU), or the GPU vendor's driver"

var loader struct {
	once sync.Once
	err  error
}

// loadVulkan opens the Vulkan loader once per process (dlopen, so that a
// tapmlc binary runs without it on machines where no target needs it).
func loadVulkan() error {
	loader.once.Do(func() { loader.err = loadLoader(loaderName) })
	return loader.err
}

// loadLoader opens the loader library lib and takes its entry points.
func loadLoader(lib string) error {
	var buf [512]C.char
	name := C.CString(lib)
	defer C.free(unsafe.Pointer(name))
	if C.tvk_load(name, &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("vulkan: %w: cannot load the Vulkan loader %s: %s; %s", errNoVulkan, lib, C.GoString(&buf[0]), fixHint)
	}
	return nil
}

// vkError is a failed Vulkan call.
type vkError struct {
	call string
	res  C.VkResult
}

func (e *vkError) Error() string { return fmt.Sprintf("%s failed: %s", e.call, resultName(e.res)) }

// check returns nil for VK_SUCCESS and an error naming call otherwise.
func check(res C.VkResult, call string) error {
	if res == C.VK_SUCCESS {
		return nil
	}
	return &vkError{call, res}
}

// checkWhat is check for the vk.c functions that name the failing call.
func checkWhat(res C.VkResult, what *C.char) error {
	if res == C.VK_SUCCESS {
		return nil
	}
	call := "vulkan call"
	if what != nil {
		call = C.GoString(what)
	}
	return &vkError{call, res}
}

// isDeviceLost reports whether err is VK_ERROR_DEVICE_LOST.
func isDeviceLost(err error) bool {
	var ve *vkError
	return errors.As(err, &ve) && ve.res == C.VK_ERROR_DEVICE_LOST
}

// isOutOfMemory reports whether err is a device or host out-of-memory.
func isOutOfMemory(err error) bool {
	var ve *vkError
	return errors.As(err, &ve) && (ve.res == C.VK_ERROR_OUT_OF_DEVICE_MEMORY || ve.res == C.VK_ERROR_OUT_OF_HOST_MEMORY)
}

// isPoolExhausted reports whether a descriptor pool is full.
func isPoolExhausted(err error) bool {
	var ve *vkError
	return errors.As(err, &ve) && (ve.res == C.VK_ERROR_OUT_OF_POOL_MEMORY || ve.res == C.VK_ERROR_FRAGMENTED_POOL)
}

func resultName(r C.VkResult) string {
	names := map[C.VkResult]string{
		C.VK_NOT_READY: "VK_NOT_READY", C.VK_TIMEOUT: "VK_TIMEOUT", C.VK_INCOMPLETE: "VK_INCOMPLETE",
		C.VK_ERROR_OUT_OF_HOST_MEMORY: "VK_ERROR_OUT_OF_HOST_MEMORY", C.VK_ERROR_OUT_OF_DEVICE_MEMORY: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
		C.VK_ERROR_INITIALIZATION_FAILED: "VK_ERROR_INITIALIZATION_FAILED", C.VK_ERROR_DEVICE_LOST: "VK_ERROR_DEVICE_LOST",
		C.VK_ERROR_MEMORY_MAP_FAILED: "VK_ERROR_MEMORY_MAP_FAILED", C.VK_ERROR_LAYER_NOT_PRESENT: "VK_ERROR_LAYER_NOT_PRESENT",
		C.VK_ERROR_EXTENSION_NOT_PRESENT: "VK_ERROR_EXTENSION_NOT_PRESENT", C.VK_ERROR_FEATURE_NOT_PRESENT: "VK_ERROR_FEATURE_NOT_PRESENT",
		C.VK_ERROR_INCOMPATIBLE_DRIVER: "VK_ERROR_INCOMPATIBLE_DRIVER", C.VK_ERROR_TOO_MANY_OBJECTS: "VK_ERROR_TOO_MANY_OBJECTS",
		C.VK_ERROR_FORMAT_NOT_SUPPORTED: "VK_ERROR_FORMAT_NOT_SUPPORTED", C.VK_ERROR_FRAGMENTED_POOL: "VK_ERROR_FRAGMENTED_POOL",
		C.VK_ERROR_UNKNOWN: "VK_ERROR_UNKNOWN", C.VK_ERROR_OUT_OF_POOL_MEMORY: "VK_ERROR_OUT_OF_POOL_MEMORY",
		C.VK_ERROR_INVALID_SHADER_NV: "VK_ERROR_INVALID_SHADER_NV",
	}
	if s, ok := names[r]; ok {
		return s
	}
	return fmt.Sprintf("VkResult %d", int(r))
}

// ctx is one Vulkan instance and logical device (C memory).
type ctx struct{ c *C.tvk_ctx }

func newCtx() ctx { return ctx{(*C.tvk_ctx)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tvk_ctx{}))))} }

func (x ctx) free() {
	if x.c != nil {
		C.tvk_destroy(x.c)
		C.free(unsafe.Pointer(x.c))
	}
}

func (x ctx) createInstance() error {
	var what *C.char
	return checkWhat(C.tvk_create_instance(x.c, &what), what)
}

// physical describes the instance's physical devices.
func (x ctx) physical() ([]physInfo, error) {
	var n C.uint32_t
	var what *C.char
	if err := checkWhat(C.tvk_physical_devices(x.c, &n, &what), what); err != nil {
		return nil, err
	}
	infos := make([]physInfo, min(int(n), 64))
	for i := range infos {
		var ci C.tvk_info
		C.tvk_describe(x.c, C.uint32_t(i), &ci)
		infos[i] = physInfoOf(&ci)
	}
	return infos, nil
}

func physInfoOf(c *C.tvk_info) physInfo {
	p := physInfo{
		Name: C.GoString(&c.name[0]), API: uint32(c.api_version), Driver: uint32(c.driver_version),
		Vendor: uint32(c.vendor_id), DeviceID: uint32(c.device_id), Type: int(c.device_type),
		QueueFamily:       int(c.queue_family),
		MaxWorkgroups:     [3]uint32{uint32(c.max_wg_count[0]), uint32(c.max_wg_count[1]), uint32(c.max_wg_count[2])},
		MaxWorkgroupSize:  [3]uint32{uint32(c.max_wg_size[0]), uint32(c.max_wg_size[1]), uint32(c.max_wg_size[2])},
		MaxInvocations:    uint32(c.max_wg_invocations),
		MaxSharedMemory:   uint32(c.max_shared_memory),
		MaxStorageBuffers: uint32(c.max_storage_buffers),
		MaxStorageRange:   uint64(c.max_storage_range),
		StorageAlign:      uint64(c.min_storage_offset_align),
		MaxAllocation:     uint64(c.max_allocation),
		SubgroupSize:      uint32(c.subgroup_size), SubgroupStages: uint32(c.subgroup_stages), SubgroupOps: uint32(c.subgroup_ops),
		ShaderF16: c.shader_f16 != 0, Storage16: c.storage_16bit != 0, SubgroupTypes: c.subgroup_extended_types != 0,
		extF16: c.ext_f16 != 0, extTypes: c.ext_extended_types != 0,
		TimestampPeriod: float64(c.timestamp_period), TimestampBits: uint32(c.timestamp_bits),
		CoopMatrix: c.ext_coopmat != 0 && c.coopmat != 0, CoopMatrixStages: uint32(c.coopmat_stages),
	}
	for _, s := range c.coopmat_shapes[:min(int(c.coopmat_count), len(c.coopmat_shapes))] {
		p.CoopMatrixShapes = append(p.CoopMatrixShapes, coopMatrixShape{M: uint32(s.m), N: uint32(s.n), K: uint32(s.k),
			A: uint32(s.a), B: uint32(s.b), C: uint32(s.c), D: uint32(s.d), Scope: uint32(s.scope)})
	}
	for i := range p.CacheUUID {
		p.CacheUUID[i] = byte(c.cache_uuid[i])
	}
	for i := 0; i < int(c.memory_types); i++ {
		p.MemoryTypes = append(p.MemoryTypes, memoryType{Flags: uint32(c.type_flags[i]), Heap: int(c.type_heap[i])})
	}
	for i := 0; i < int(c.memory_heaps); i++ {
		p.Heaps = append(p.Heaps, memoryHeap{Size: uint64(c.heap_size[i]), Flags: uint32(c.heap_flags[i])})
	}
	return p
}

func (x ctx) createDevice(index int, p *physInfo, f features) error {
	cf := C.tvk_features{
		shader_f16: cBool(f.f16), storage_16bit: cBool(f.storage16), subgroup_extended_types: cBool(f.subgroupTypes),
		ext_f16: cBool(f.f16 && p.extF16), ext_extended_types: cBool(f.subgroupTypes && p.extTypes),
		coopmat: cBool(f.coopMatrix),
	}
	var what *C.char
	return checkWhat(C.tvk_create_device(x.c, C.uint32_t(index), C.uint32_t(p.QueueFamily), &cf, &what), what)
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// memBlock is one allocation with its buffer, mapped when host-visible.
type memBlock struct {
	buf, mem C.uint64_t
	ptr      unsafe.Pointer // nil unless mapped
	size     uint64
	id       int // index in the device's blocks (hazards compare it)
}

func (x ctx) createBlock(size uint64, memType int, mapped bool) (*memBlock, error) {
	b := &memBlock{size: size}
	var what *C.char
	err := checkWhat(C.tvk_create_block(x.c, C.uint64_t(size), C.uint32_t(memType), cBool(mapped), &b.buf, &b.mem, &b.ptr, &what), what)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (x ctx) destroyBlock(b *memBlock) { C.tvk_destroy_block(x.c, b.buf, b.mem) }

// bytes returns the mapped bytes [off, off+n) of a host-visible block.
func (b *memBlock) bytes(off, n uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(b.ptr, off)), n)
}

// vkPipeline is a compute pipeline with its layouts.
type vkPipeline struct {
	setLayout, layout, pipe C.uint64_t
	bindings                int
	// op and inputs name the pipeline in profiles: the op of the kernel
	// it was made for and the input types of the first node that ran it
	// ("" for a kernel compiled alone).
	op, inputs string
}

func (x ctx) createPipeline(words []uint32, entry string, bindings int, cache C.uint64_t) (*vkPipeline, error) {
	code := C.malloc(C.size_t(4 * len(words)))
	defer C.free(code)
	copy(unsafe.Slice((*uint32)(code), len(words)), words)
	ce := C.CString(entry)
	defer C.free(unsafe.Pointer(ce))
	p := &vkPipeline{bindings: bindings}
	var what *C.char
	err := checkWhat(C.tvk_create_pipeline(x.c, (*C.uint32_t)(code), C.size_t(len(words)), ce, C.uint32_t(bindings), cache,
		&p.setLayout, &p.layout, &p.pipe, &what), what)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (x ctx) destroyPipeline(p *vkPipeline) {
	C.tvk_destroy_pipeline(x.c, p.setLayout, p.layout, p.pipe)
}

func (x ctx) createPipelineCache(data []byte) (C.uint64_t, error) {
	var cache C.uint64_t
	var p unsafe.Pointer
	if len(data) > 0 {
		p = C.CBytes(data)
		defer C.free(p)
	}
	return cache, check(C.tvk_create_pipeline_cache(x.c, p, C.size_t(len(data)), &cache), "vkCreatePipelineCache")
}

func (x ctx) pipelineCacheData(cache C.uint64_t) ([]byte, error) {
	var n C.size_t
	if err := check(C.tvk_pipeline_cache_data(x.c, cache, nil, &n), "vkGetPipelineCacheData"); err != nil || n == 0 {
		return nil, err
	}
	p := C.malloc(n)
	defer C.free(p)
	res := C.tvk_pipeline_cache_data(x.c, cache, p, &n)
	if res != C.VK_SUCCESS && res != C.VK_INCOMPLETE {
		return nil, check(res, "vkGetPipelineCacheData")
	}
	return C.GoBytes(p, C.int(n)), nil
}

func (x ctx) destroyPipelineCache(cache C.uint64_t) { C.tvk_destroy_pipeline_cache(x.c, cache) }

func (x ctx) createDescriptorPool(sets, buffers int) (C.uint64_t, error) {
	var pool C.uint64_t
	return pool, check(C.tvk_create_descriptor_pool(x.c, C.uint32_t(sets), C.uint32_t(buffers), &pool), "vkCreateDescriptorPool")
}

func (x ctx) destroyDescriptorPool(pool C.uint64_t) { C.tvk_destroy_descriptor_pool(x.c, pool) }

// descriptorSet allocates a set of layout from pool binding the given
// ranges (bufs[i], offs[i], ranges[i]) as storage buffers 0, 1, ...
func (x ctx) descriptorSet(pool, layout C.uint64_t, bufs, offs, ranges []C.uint64_t) (C.uint64_t, error) {
	var set C.uint64_t
	if len(bufs) == 0 {
		return 0, errors.New("a descriptor set of no bindings")
	}
	return set, check(C.tvk_descriptor_set(x.c, pool, layout, C.uint32_t(len(bufs)), &bufs[0], &offs[0], &ranges[0], &set), "vkAllocateDescriptorSets")
}

func (x ctx) commandBuffer() (C.VkCommandBuffer, error) {
	var cb C.VkCommandBuffer
	return cb, check(C.tvk_command_buffer(x.c, &cb), "vkAllocateCommandBuffers")
}

func (x ctx) freeCommandBuffer(cb C.VkCommandBuffer) { C.tvk_free_command_buffer(x.c, cb) }

// record records ops into cb (once: the buffer is submitted once).
func (x ctx) record(cb C.VkCommandBuffer, ops []C.tvk_op, once bool) error {
	var what *C.char
	var p *C.tvk_op
	if len(ops) > 0 {
		p = &ops[0]
	}
	return checkWhat(C.tvk_record(x.c, cb, p, C.size_t(len(ops)), cBool(once), 0, &what), what)
}

// recordStamped is record with a timestamp before the list and after each
// dispatch or copy, into query pool stamps (profile.go).
func (x ctx) recordStamped(cb C.VkCommandBuffer, ops []C.tvk_op, stamps C.uint64_t) error {
	var what *C.char
	var p *C.tvk_op
	if len(ops) > 0 {
		p = &ops[0]
	}
	return checkWhat(C.tvk_record(x.c, cb, p, C.size_t(len(ops)), 1, stamps, &what), what)
}

func (x ctx) createQueryPool(n int) (C.uint64_t, error) {
	var q C.uint64_t
	return q, check(C.tvk_create_query_pool(x.c, C.uint32_t(n), &q), "vkCreateQueryPool")
}

func (x ctx) destroyQueryPool(q C.uint64_t) { C.tvk_destroy_query_pool(x.c, q) }

// timestamps reads the first len(out) queries of pool q (waiting for them).
func (x ctx) timestamps(q C.uint64_t, out []uint64) error {
	if len(out) == 0 {
		return nil
	}
	return check(C.tvk_timestamps(x.c, q, C.uint32_t(len(out)), (*C.uint64_t)(unsafe.Pointer(&out[0]))), "vkGetQueryPoolResults")
}

func (x ctx) createFence() (C.uint64_t, error) {
	var f C.uint64_t
	return f, check(C.tvk_create_fence(x.c, &f), "vkCreateFence")
}

func (x ctx) destroyFence(f C.uint64_t) { C.tvk_destroy_fence(x.c, f) }

func (x ctx) submit(cb C.VkCommandBuffer, fence C.uint64_t) error {
	return check(C.tvk_submit(x.c, cb, fence), "vkQueueSubmit")
}

// fenceDone reports whether a fence is signalled.
func (x ctx) fenceDone(f C.uint64_t) (bool, error) {
	switch res := C.tvk_fence_status(x.c, f); res {
	case C.VK_SUCCESS:
		return true, nil
	case C.VK_NOT_READY:
		return false, nil
	default:
		return false, check(res, "vkGetFenceStatus")
	}
}

// wait waits for every fence (at most 64), up to timeout nanoseconds;
// done is false on a timeout.
func (x ctx) wait(fences []C.uint64_t, timeout uint64) (done bool, err error) {
	if len(fences) == 0 {
		return true, nil
	}
	switch res := C.tvk_wait(x.c, &fences[0], C.uint32_t(len(fences)), C.uint64_t(timeout)); res {
	case C.VK_SUCCESS:
		return true, nil
	case C.VK_TIMEOUT:
		return false, nil
	default:
		return false, check(res, "vkWaitForFences")
	}
}

func (x ctx) resetFence(f C.uint64_t) error { return check(C.tvk_reset_fence(x.c, f), "vkResetFences") }

func (x ctx) waitIdle() error { return check(C.tvk_wait_idle(x.c), "vkDeviceWaitIdle") }

// opBytes views a command list as bytes (the replay cache's key).
func opBytes(ops []C.tvk_op) []byte {
	if len(ops) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&ops[0])), len(ops)*int(unsafe.Sizeof(ops[0])))
}

func dispatchOp(p *vkPipeline, set C.uint64_t, grid [3]int) C.tvk_op {
	return C.tvk_op{kind: C.TVK_OP_DISPATCH, pipeline: p.pipe, layout: p.layout, set: set,
		x: C.uint32_t(grid[0]), y: C.uint32_t(grid[1]), z: C.uint32_t(grid[2])}
}

func copyOp(src C.uint64_t, srcOff uint64, dst C.uint64_t, dstOff, size uint64) C.tvk_op {
	return C.tvk_op{kind: C.TVK_OP_COPY, src: src, dst: dst, src_off: C.uint64_t(srcOff), dst_off: C.uint64_t(dstOff), size: C.uint64_t(size)}
}

func barrierOp() C.tvk_op { return C.tvk_op{kind: C.TVK_OP_BARRIER} }
