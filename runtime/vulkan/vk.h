// The C side of runtime/vulkan: the Vulkan loader opened with dlopen, the
// function table, and the few calls that are cheaper made in C than one by
// one from Go (recording a whole command list, creating a pipeline).
// Every function returns the VkResult of the call that failed, or
// VK_SUCCESS, and names the failing call in *what.
#ifndef TAPML_VK_H
#define TAPML_VK_H

#define VK_NO_PROTOTYPES
#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

// Non-dispatchable handles cross to Go as uint64 (they are pointers on
// 64-bit platforms and uint64 on 32-bit ones).
#if VK_USE_64_BIT_PTR_DEFINES
#define TVK_H(T, x) ((T)(uintptr_t)(x))
#define TVK_U(x) ((uint64_t)(uintptr_t)(x))
#else
#define TVK_H(T, x) ((T)(x))
#define TVK_U(x) ((uint64_t)(x))
#endif

#define TVK_FNS(X)                                                                                                     \
	X(vkDestroyInstance)                                                                                               \
	X(vkEnumeratePhysicalDevices)                                                                                      \
	X(vkGetPhysicalDeviceProperties)                                                                                   \
	X(vkGetPhysicalDeviceProperties2)                                                                                  \
	X(vkGetPhysicalDeviceFeatures2)                                                                                    \
	X(vkGetPhysicalDeviceMemoryProperties)                                                                             \
	X(vkGetPhysicalDeviceQueueFamilyProperties)                                                                        \
	X(vkEnumerateDeviceExtensionProperties)                                                                            \
	X(vkCreateDevice)                                                                                                  \
	X(vkGetDeviceProcAddr)

#define TVK_DEVICE_FNS(X)                                                                                              \
	X(vkDestroyDevice)                                                                                                 \
	X(vkGetDeviceQueue)                                                                                                \
	X(vkDeviceWaitIdle)                                                                                                \
	X(vkCreateBuffer)                                                                                                  \
	X(vkDestroyBuffer)                                                                                                 \
	X(vkGetBufferMemoryRequirements)                                                                                   \
	X(vkAllocateMemory)                                                                                                \
	X(vkFreeMemory)                                                                                                    \
	X(vkBindBufferMemory)                                                                                              \
	X(vkMapMemory)                                                                                                     \
	X(vkCreateShaderModule)                                                                                            \
	X(vkDestroyShaderModule)                                                                                           \
	X(vkCreateDescriptorSetLayout)                                                                                     \
	X(vkDestroyDescriptorSetLayout)                                                                                    \
	X(vkCreatePipelineLayout)                                                                                          \
	X(vkDestroyPipelineLayout)                                                                                         \
	X(vkCreateComputePipelines)                                                                                        \
	X(vkDestroyPipeline)                                                                                               \
	X(vkCreatePipelineCache)                                                                                           \
	X(vkDestroyPipelineCache)                                                                                          \
	X(vkGetPipelineCacheData)                                                                                          \
	X(vkCreateDescriptorPool)                                                                                          \
	X(vkDestroyDescriptorPool)                                                                                         \
	X(vkAllocateDescriptorSets)                                                                                        \
	X(vkUpdateDescriptorSets)                                                                                          \
	X(vkCreateCommandPool)                                                                                             \
	X(vkDestroyCommandPool)                                                                                            \
	X(vkAllocateCommandBuffers)                                                                                        \
	X(vkFreeCommandBuffers)                                                                                            \
	X(vkBeginCommandBuffer)                                                                                            \
	X(vkEndCommandBuffer)                                                                                              \
	X(vkCmdBindPipeline)                                                                                               \
	X(vkCmdBindDescriptorSets)                                                                                         \
	X(vkCmdDispatch)                                                                                                   \
	X(vkCmdPipelineBarrier)                                                                                            \
	X(vkCmdCopyBuffer)                                                                                                 \
	X(vkQueueSubmit)                                                                                                   \
	X(vkCreateFence)                                                                                                   \
	X(vkDestroyFence)                                                                                                  \
	X(vkResetFences)                                                                                                   \
	X(vkWaitForFences)                                                                                                 \
	X(vkGetFenceStatus)                                                                                                \
	X(vkCreateQueryPool)                                                                                               \
	X(vkDestroyQueryPool)                                                                                              \
	X(vkCmdResetQueryPool)                                                                                             \
	X(vkCmdWriteTimestamp)                                                                                             \
	X(vkGetQueryPoolResults)

#define TVK_DECL(name) PFN_##name name;

// tvk_ctx is one instance and, once created, one logical device.
typedef struct {
	VkInstance instance;
	uint32_t instance_version; // the API version the instance was created for
	VkPhysicalDevice phys;
	VkDevice device;
	VkQueue queue;
	uint32_t queue_family;
	VkCommandPool cmd_pool;
	TVK_FNS(TVK_DECL)
	TVK_DEVICE_FNS(TVK_DECL)
} tvk_ctx;

// tvk_coopmat_shape is one VkCooperativeMatrixPropertiesNV: an MxNxK
// product of A (MxK) and B (KxN) added to C into D, in VkComponentTypeNV
// types, at a VkScopeNV.
typedef struct {
	uint32_t m, n, k, a, b, c, d, scope;
} tvk_coopmat_shape;

#define TVK_MAX_COOPMAT 64

// tvk_info is what the device package needs to know of a physical device.
typedef struct {
	char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	// api_version is the version tapml may use: the device's, capped by
	// the instance's.
	uint32_t api_version, driver_version, vendor_id, device_id, device_type;
	uint8_t cache_uuid[VK_UUID_SIZE];
	int queue_family; // a queue family with compute, or -1

	uint32_t max_wg_count[3], max_wg_size[3], max_wg_invocations, max_shared_memory;
	uint32_t max_storage_buffers, max_storage_range, max_bound_sets;
	uint64_t min_storage_offset_align, max_allocation, non_coherent_atom;

	uint32_t subgroup_size, subgroup_stages, subgroup_ops;
	float timestamp_period;  // nanoseconds per timestamp tick
	uint32_t timestamp_bits; // valid bits of the queue family's timestamps (0: none)
	int shader_f16, storage_16bit, subgroup_extended_types;
	int ext_f16, ext_extended_types; // needs the extension (a Vulkan 1.1 device)

	// VK_NV_cooperative_matrix: whether the device has the extension, its
	// cooperativeMatrix feature, the stages that may use it, and the
	// shapes and types it multiplies (the first TVK_MAX_COOPMAT of them).
	int ext_coopmat, coopmat;
	uint32_t coopmat_stages, coopmat_count;
	tvk_coopmat_shape coopmat_shapes[TVK_MAX_COOPMAT];

	uint32_t memory_types, memory_heaps;
	uint32_t type_flags[VK_MAX_MEMORY_TYPES], type_heap[VK_MAX_MEMORY_TYPES];
	uint64_t heap_size[VK_MAX_MEMORY_HEAPS];
	uint32_t heap_flags[VK_MAX_MEMORY_HEAPS];
} tvk_info;

// tvk_features are the optional features the device is created with.
typedef struct {
	int shader_f16, storage_16bit, subgroup_extended_types;
	int ext_f16, ext_extended_types;
	int coopmat; // VK_NV_cooperative_matrix and its cooperativeMatrix feature
} tvk_features;

// tvk_op is one command of a command list; kind is one of TVK_OP_*.
enum { TVK_OP_DISPATCH = 1, TVK_OP_COPY = 2, TVK_OP_BARRIER = 3 };
typedef struct {
	uint32_t kind;
	uint32_t x, y, z; // dispatch: workgroups
	uint64_t pipeline, layout, set; // dispatch
	uint64_t src, dst, src_off, dst_off, size; // copy
} tvk_op;

int tvk_load(const char *lib, char *err, size_t errlen);
VkResult tvk_create_instance(tvk_ctx *c, const char **what);
VkResult tvk_physical_devices(tvk_ctx *c, uint32_t *n, const char **what);
void tvk_describe(tvk_ctx *c, uint32_t index, tvk_info *info);
VkResult tvk_create_device(tvk_ctx *c, uint32_t index, uint32_t family, const tvk_features *f, const char **what);
void tvk_destroy(tvk_ctx *c);

VkResult tvk_create_block(tvk_ctx *c, uint64_t size, uint32_t type, int map, uint64_t *buf, uint64_t *mem, void **ptr, const char **what);
void tvk_destroy_block(tvk_ctx *c, uint64_t buf, uint64_t mem);

VkResult tvk_create_pipeline(tvk_ctx *c, const uint32_t *code, size_t words, const char *entry, uint32_t bindings,
                             uint64_t cache, uint64_t *set_layout, uint64_t *layout, uint64_t *pipeline, const char **what);
void tvk_destroy_pipeline(tvk_ctx *c, uint64_t set_layout, uint64_t layout, uint64_t pipeline);

VkResult tvk_create_pipeline_cache(tvk_ctx *c, const void *data, size_t len, uint64_t *cache);
VkResult tvk_pipeline_cache_data(tvk_ctx *c, uint64_t cache, void *data, size_t *len);
void tvk_destroy_pipeline_cache(tvk_ctx *c, uint64_t cache);

VkResult tvk_create_descriptor_pool(tvk_ctx *c, uint32_t sets, uint32_t buffers, uint64_t *pool);
void tvk_destroy_descriptor_pool(tvk_ctx *c, uint64_t pool);
VkResult tvk_descriptor_set(tvk_ctx *c, uint64_t pool, uint64_t set_layout, uint32_t n, const uint64_t *bufs,
                            const uint64_t *offs, const uint64_t *ranges, uint64_t *set);

VkResult tvk_command_buffer(tvk_ctx *c, VkCommandBuffer *cb);
void tvk_free_command_buffer(tvk_ctx *c, VkCommandBuffer cb);
// tvk_record records ops into cb. With a query pool stamps (non-zero) it
// also writes a timestamp before the first command (query 0) and after each
// dispatch or copy (queries 1, 2, ...): the profile of the list.
VkResult tvk_record(tvk_ctx *c, VkCommandBuffer cb, const tvk_op *ops, size_t n, int once, uint64_t stamps,
                    const char **what);
VkResult tvk_create_query_pool(tvk_ctx *c, uint32_t n, uint64_t *pool);
void tvk_destroy_query_pool(tvk_ctx *c, uint64_t pool);
VkResult tvk_timestamps(tvk_ctx *c, uint64_t pool, uint32_t n, uint64_t *out);

VkResult tvk_create_fence(tvk_ctx *c, uint64_t *fence);
void tvk_destroy_fence(tvk_ctx *c, uint64_t fence);
VkResult tvk_submit(tvk_ctx *c, VkCommandBuffer cb, uint64_t fence);
VkResult tvk_fence_status(tvk_ctx *c, uint64_t fence);
VkResult tvk_wait(tvk_ctx *c, const uint64_t *fences, uint32_t n, uint64_t timeout_ns);
VkResult tvk_reset_fence(tvk_ctx *c, uint64_t fence);
VkResult tvk_wait_idle(tvk_ctx *c);

#endif
