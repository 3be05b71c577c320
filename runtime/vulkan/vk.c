#include "vk.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The loader's entry points, set once by tvk_load.
static PFN_vkGetInstanceProcAddr tvk_gipa;
static PFN_vkCreateInstance tvk_create_instance_fn;
static PFN_vkEnumerateInstanceVersion tvk_instance_version;

int tvk_load(const char *lib, char *err, size_t errlen) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(h, "vkGetInstanceProcAddr");
	if (!gipa) {
		snprintf(err, errlen, "%s has no vkGetInstanceProcAddr", lib);
		dlclose(h);
		return -1;
	}
	tvk_create_instance_fn = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
	tvk_instance_version = (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion");
	if (!tvk_create_instance_fn) {
		snprintf(err, errlen, "%s has no vkCreateInstance", lib);
		dlclose(h);
		return -1;
	}
	tvk_gipa = gipa; // the library stays loaded for the process
	return 0;
}

VkResult tvk_create_instance(tvk_ctx *c, const char **what) {
	uint32_t version = VK_API_VERSION_1_0;
	if (tvk_instance_version) tvk_instance_version(&version);
	if (VK_API_VERSION_MAJOR(version) == 1 && VK_API_VERSION_MINOR(version) > 3) version = VK_API_VERSION_1_3;
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
	                         .pApplicationName = "tapml",
	                         .pEngineName = "tapml",
	                         .apiVersion = version};
	VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
	*what = "vkCreateInstance";
	c->instance_version = version;
	VkResult r = tvk_create_instance_fn(&ci, NULL, &c->instance);
	if (r != VK_SUCCESS) return r;
#define TVK_LOAD(name)                                                                                                 \
	c->name = (PFN_##name)tvk_gipa(c->instance, #name);                                                                \
	if (!c->name) {                                                                                                    \
		*what = "vkGetInstanceProcAddr(" #name ")";                                                                    \
		return VK_ERROR_INITIALIZATION_FAILED;                                                                         \
	}
	TVK_FNS(TVK_LOAD)
	return VK_SUCCESS;
}

VkResult tvk_physical_devices(tvk_ctx *c, uint32_t *n, const char **what) {
	*what = "vkEnumeratePhysicalDevices";
	return c->vkEnumeratePhysicalDevices(c->instance, n, NULL);
}

static VkPhysicalDevice tvk_phys(tvk_ctx *c, uint32_t index) {
	VkPhysicalDevice devs[64];
	uint32_t n = 64;
	VkResult r = c->vkEnumeratePhysicalDevices(c->instance, &n, devs);
	if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || index >= n) return VK_NULL_HANDLE;
	return devs[index];
}

static int tvk_has_extension(tvk_ctx *c, VkPhysicalDevice p, const char *name) {
	uint32_t n = 0;
	if (c->vkEnumerateDeviceExtensionProperties(p, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
	VkExtensionProperties *props = calloc(n, sizeof *props);
	if (!props) return 0;
	int found = 0;
	if (c->vkEnumerateDeviceExtensionProperties(p, NULL, &n, props) >= 0)
		for (uint32_t i = 0; i < n && !found; i++) found = strcmp(props[i].extensionName, name) == 0;
	free(props);
	return found;
}

// tvk_coopmat_shapes lists the cooperative-matrix products p runs
// (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV, an instance-level
// function of the extension, so looked up on the instance).
static void tvk_coopmat_shapes(tvk_ctx *c, VkPhysicalDevice p, tvk_info *info) {
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
	    (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)tvk_gipa(c->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
	VkCooperativeMatrixPropertiesNV props[TVK_MAX_COOPMAT];
	uint32_t n = TVK_MAX_COOPMAT;
	for (uint32_t i = 0; i < n; i++) props[i] = (VkCooperativeMatrixPropertiesNV){.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV};
	if (!get) return;
	VkResult r = get(p, &n, props);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE) return;
	for (uint32_t i = 0; i < n && i < TVK_MAX_COOPMAT; i++) {
		info->coopmat_shapes[i] = (tvk_coopmat_shape){props[i].MSize, props[i].NSize, props[i].KSize, props[i].AType,
		                                              props[i].BType, props[i].CType, props[i].DType, props[i].scope};
	}
	info->coopmat_count = n < TVK_MAX_COOPMAT ? n : TVK_MAX_COOPMAT;
}

void tvk_describe(tvk_ctx *c, uint32_t index, tvk_info *info) {
	memset(info, 0, sizeof *info);
	info->queue_family = -1;
	VkPhysicalDevice p = tvk_phys(c, index);
	if (!p) return;
	VkPhysicalDeviceProperties props;
	c->vkGetPhysicalDeviceProperties(p, &props);
	memcpy(info->name, props.deviceName, sizeof info->name);
	info->name[sizeof info->name - 1] = 0;
	if (props.apiVersion > c->instance_version) props.apiVersion = c->instance_version;
	info->api_version = props.apiVersion;
	info->driver_version = props.driverVersion;
	info->vendor_id = props.vendorID;
	info->device_id = props.deviceID;
	info->device_type = props.deviceType;
	memcpy(info->cache_uuid, props.pipelineCacheUUID, VK_UUID_SIZE);
	VkPhysicalDeviceLimits *l = &props.limits;
	for (int i = 0; i < 3; i++) {
		info->max_wg_count[i] = l->maxComputeWorkGroupCount[i];
		info->max_wg_size[i] = l->maxComputeWorkGroupSize[i];
	}
	info->max_wg_invocations = l->maxComputeWorkGroupInvocations;
	info->max_shared_memory = l->maxComputeSharedMemorySize;
	info->max_storage_buffers = l->maxPerStageDescriptorStorageBuffers;
	info->max_storage_range = l->maxStorageBufferRange;
	info->max_bound_sets = l->maxBoundDescriptorSets;
	info->timestamp_period = l->timestampComputeAndGraphics ? l->timestampPeriod : 0;
	info->min_storage_offset_align = l->minStorageBufferOffsetAlignment;
	info->non_coherent_atom = l->nonCoherentAtomSize;
	info->max_allocation = 1ull << 31; // Vulkan 1.0's guarantee, unless maintenance3 says more

	if (props.apiVersion >= VK_API_VERSION_1_1) {
		info->ext_coopmat = tvk_has_extension(c, p, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
		VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
		VkPhysicalDeviceCooperativeMatrixPropertiesNV cmp = {
		    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV, .pNext = &m3};
		VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
		                                         .pNext = info->ext_coopmat ? (void *)&cmp : (void *)&m3};
		VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
		c->vkGetPhysicalDeviceProperties2(p, &p2);
		info->subgroup_size = sg.subgroupSize;
		info->subgroup_stages = sg.supportedStages;
		info->subgroup_ops = sg.supportedOperations;
		info->coopmat_stages = info->ext_coopmat ? cmp.cooperativeMatrixSupportedStages : 0;
		if (m3.maxMemoryAllocationSize) info->max_allocation = m3.maxMemoryAllocationSize;
		if (info->ext_coopmat) tvk_coopmat_shapes(c, p, info);

		// Float16 arithmetic and 16-bit storage buffers (Vulkan 1.2 or
		// VK_KHR_shader_float16_int8); subgroup operations on 16-bit types
		// (1.2 or VK_KHR_shader_subgroup_extended_types).
		int core12 = props.apiVersion >= VK_API_VERSION_1_2;
		info->ext_f16 = !core12 && tvk_has_extension(c, p, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
		info->ext_extended_types = !core12 && tvk_has_extension(c, p, VK_KHR_SHADER_SUBGROUP_EXTENDED_TYPES_EXTENSION_NAME);
		VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
		VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
		VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures ext = {
		    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES};
		VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
		void *chain = &s16;
		if (info->ext_coopmat) {
			cm.pNext = chain;
			chain = &cm;
		}
		if (core12 || info->ext_f16) {
			f16.pNext = chain;
			chain = &f16;
		}
		if (core12 || info->ext_extended_types) {
			ext.pNext = chain;
			chain = &ext;
		}
		VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = chain};
		c->vkGetPhysicalDeviceFeatures2(p, &f2);
		info->storage_16bit = s16.storageBuffer16BitAccess;
		info->shader_f16 = f16.shaderFloat16;
		info->subgroup_extended_types = ext.shaderSubgroupExtendedTypes;
		info->coopmat = cm.cooperativeMatrix;
	}

	VkPhysicalDeviceMemoryProperties mem;
	c->vkGetPhysicalDeviceMemoryProperties(p, &mem);
	info->memory_types = mem.memoryTypeCount;
	info->memory_heaps = mem.memoryHeapCount;
	for (uint32_t i = 0; i < mem.memoryTypeCount && i < VK_MAX_MEMORY_TYPES; i++) {
		info->type_flags[i] = mem.memoryTypes[i].propertyFlags;
		info->type_heap[i] = mem.memoryTypes[i].heapIndex;
	}
	for (uint32_t i = 0; i < mem.memoryHeapCount && i < VK_MAX_MEMORY_HEAPS; i++) {
		info->heap_size[i] = mem.memoryHeaps[i].size;
		info->heap_flags[i] = mem.memoryHeaps[i].flags;
	}

	// A queue family with compute; one without graphics first (a GPU's
	// compute-only family), as llama.cpp's Vulkan backend chooses.
	VkQueueFamilyProperties fams[64];
	uint32_t nf = 64;
	c->vkGetPhysicalDeviceQueueFamilyProperties(p, &nf, fams);
	for (uint32_t pass = 0; pass < 2 && info->queue_family < 0; pass++) {
		for (uint32_t i = 0; i < nf; i++) {
			VkQueueFlags fl = fams[i].queueFlags;
			if ((fl & VK_QUEUE_COMPUTE_BIT) && fams[i].queueCount > 0 && (pass == 1 || !(fl & VK_QUEUE_GRAPHICS_BIT))) {
				info->queue_family = (int)i;
				info->timestamp_bits = info->timestamp_period > 0 ? fams[i].timestampValidBits : 0;
				break;
			}
		}
	}
}

VkResult tvk_create_device(tvk_ctx *c, uint32_t index, uint32_t family, const tvk_features *f, const char **what) {
	*what = "vkEnumeratePhysicalDevices";
	VkPhysicalDevice p = tvk_phys(c, index);
	if (!p) return VK_ERROR_INITIALIZATION_FAILED;
	c->phys = p;
	float prio = 1.0f;
	VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
	                             .queueFamilyIndex = family,
	                             .queueCount = 1,
	                             .pQueuePriorities = &prio};
	const char *exts[3];
	uint32_t next = 0;
	if (f->ext_f16) exts[next++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
	if (f->ext_extended_types) exts[next++] = VK_KHR_SHADER_SUBGROUP_EXTENDED_TYPES_EXTENSION_NAME;
	if (f->coopmat) exts[next++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
	VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
	                                            .storageBuffer16BitAccess = f->storage_16bit ? VK_TRUE : VK_FALSE};
	VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
	                                                 .shaderFloat16 = VK_TRUE};
	VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures ext = {
	    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES, .shaderSubgroupExtendedTypes = VK_TRUE};
	void *chain = NULL;
	if (f->storage_16bit) chain = &s16;
	if (f->shader_f16) {
		f16.pNext = chain;
		chain = &f16;
	}
	if (f->subgroup_extended_types) {
		ext.pNext = chain;
		chain = &ext;
	}
	VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
	                                                  .cooperativeMatrix = VK_TRUE};
	if (f->coopmat) {
		cm.pNext = chain;
		chain = &cm;
	}
	VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
	                         .pNext = chain,
	                         .queueCreateInfoCount = 1,
	                         .pQueueCreateInfos = &q,
	                         .enabledExtensionCount = next,
	                         .ppEnabledExtensionNames = next ? exts : NULL};
	*what = "vkCreateDevice";
	VkResult r = c->vkCreateDevice(p, &ci, NULL, &c->device);
	if (r != VK_SUCCESS) return r;
#define TVK_LOAD_DEVICE(name)                                                                                          \
	c->name = (PFN_##name)c->vkGetDeviceProcAddr(c->device, #name);                                                    \
	if (!c->name) {                                                                                                    \
		*what = "vkGetDeviceProcAddr(" #name ")";                                                                      \
		return VK_ERROR_INITIALIZATION_FAILED;                                                                         \
	}
	TVK_DEVICE_FNS(TVK_LOAD_DEVICE)
	c->queue_family = family;
	c->vkGetDeviceQueue(c->device, family, 0, &c->queue);
	VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
	                               .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
	                               .queueFamilyIndex = family};
	*what = "vkCreateCommandPool";
	return c->vkCreateCommandPool(c->device, &pci, NULL, &c->cmd_pool);
}

void tvk_destroy(tvk_ctx *c) {
	if (c->device) {
		if (c->cmd_pool) c->vkDestroyCommandPool(c->device, c->cmd_pool, NULL);
		c->vkDestroyDevice(c->device, NULL);
	}
	if (c->instance) c->vkDestroyInstance(c->instance, NULL);
	memset(c, 0, sizeof *c);
}

VkResult tvk_create_block(tvk_ctx *c, uint64_t size, uint32_t type, int map, uint64_t *buf, uint64_t *mem, void **ptr,
                          const char **what) {
	VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
	                         .size = size,
	                         .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
	                                  VK_BUFFER_USAGE_TRANSFER_DST_BIT,
	                         .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
	VkBuffer b = VK_NULL_HANDLE;
	VkDeviceMemory m = VK_NULL_HANDLE;
	*what = "vkCreateBuffer";
	VkResult r = c->vkCreateBuffer(c->device, &bi, NULL, &b);
	if (r != VK_SUCCESS) return r;
	VkMemoryRequirements req;
	c->vkGetBufferMemoryRequirements(c->device, b, &req);
	if (!(req.memoryTypeBits & (1u << type))) {
		*what = "vkGetBufferMemoryRequirements (the buffer cannot live in the chosen memory type)";
		c->vkDestroyBuffer(c->device, b, NULL);
		return VK_ERROR_FEATURE_NOT_PRESENT;
	}
	VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = type};
	*what = "vkAllocateMemory";
	r = c->vkAllocateMemory(c->device, &ai, NULL, &m);
	if (r == VK_SUCCESS) {
		*what = "vkBindBufferMemory";
		r = c->vkBindBufferMemory(c->device, b, m, 0);
	}
	*ptr = NULL;
	if (r == VK_SUCCESS && map) {
		*what = "vkMapMemory";
		r = c->vkMapMemory(c->device, m, 0, VK_WHOLE_SIZE, 0, ptr);
	}
	if (r != VK_SUCCESS) {
		c->vkDestroyBuffer(c->device, b, NULL);
		if (m) c->vkFreeMemory(c->device, m, NULL);
		return r;
	}
	*buf = TVK_U(b);
	*mem = TVK_U(m);
	return VK_SUCCESS;
}

void tvk_destroy_block(tvk_ctx *c, uint64_t buf, uint64_t mem) {
	c->vkDestroyBuffer(c->device, TVK_H(VkBuffer, buf), NULL);
	c->vkFreeMemory(c->device, TVK_H(VkDeviceMemory, mem), NULL); // unmaps too
}

VkResult tvk_create_pipeline(tvk_ctx *c, const uint32_t *code, size_t words, const char *entry, uint32_t bindings,
                             uint64_t cache, uint64_t *set_layout, uint64_t *layout, uint64_t *pipeline, const char **what) {
	VkDescriptorSetLayoutBinding b[64];
	if (bindings > 64) {
		*what = "tvk_create_pipeline (more than 64 bindings)";
		return VK_ERROR_INITIALIZATION_FAILED;
	}
	for (uint32_t i = 0; i < bindings; i++) {
		b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
		                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
		                                      .descriptorCount = 1,
		                                      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
	}
	VkDescriptorSetLayoutCreateInfo dli = {
	    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = bindings, .pBindings = b};
	VkDescriptorSetLayout dsl = VK_NULL_HANDLE;
	VkPipelineLayout pl = VK_NULL_HANDLE;
	VkShaderModule mod = VK_NULL_HANDLE;
	VkPipeline pipe = VK_NULL_HANDLE;
	*what = "vkCreateDescriptorSetLayout";
	VkResult r = c->vkCreateDescriptorSetLayout(c->device, &dli, NULL, &dsl);
	if (r == VK_SUCCESS) {
		VkPipelineLayoutCreateInfo pli = {
		    .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &dsl};
		*what = "vkCreatePipelineLayout";
		r = c->vkCreatePipelineLayout(c->device, &pli, NULL, &pl);
	}
	if (r == VK_SUCCESS) {
		VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = words * 4, .pCode = code};
		*what = "vkCreateShaderModule";
		r = c->vkCreateShaderModule(c->device, &mi, NULL, &mod);
	}
	if (r == VK_SUCCESS) {
		VkComputePipelineCreateInfo ci = {
		    .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		    .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
		              .stage = VK_SHADER_STAGE_COMPUTE_BIT,
		              .module = mod,
		              .pName = entry},
		    .layout = pl};
		*what = "vkCreateComputePipelines";
		r = c->vkCreateComputePipelines(c->device, TVK_H(VkPipelineCache, cache), 1, &ci, NULL, &pipe);
	}
	if (mod) c->vkDestroyShaderModule(c->device, mod, NULL);
	if (r != VK_SUCCESS) {
		if (pipe) c->vkDestroyPipeline(c->device, pipe, NULL);
		if (pl) c->vkDestroyPipelineLayout(c->device, pl, NULL);
		if (dsl) c->vkDestroyDescriptorSetLayout(c->device, dsl, NULL);
		return r;
	}
	*set_layout = TVK_U(dsl);
	*layout = TVK_U(pl);
	*pipeline = TVK_U(pipe);
	return VK_SUCCESS;
}

void tvk_destroy_pipeline(tvk_ctx *c, uint64_t set_layout, uint64_t layout, uint64_t pipeline) {
	c->vkDestroyPipeline(c->device, TVK_H(VkPipeline, pipeline), NULL);
	c->vkDestroyPipelineLayout(c->device, TVK_H(VkPipelineLayout, layout), NULL);
	c->vkDestroyDescriptorSetLayout(c->device, TVK_H(VkDescriptorSetLayout, set_layout), NULL);
}

VkResult tvk_create_pipeline_cache(tvk_ctx *c, const void *data, size_t len, uint64_t *cache) {
	VkPipelineCacheCreateInfo ci = {
	    .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = len, .pInitialData = data};
	VkPipelineCache pc = VK_NULL_HANDLE;
	VkResult r = c->vkCreatePipelineCache(c->device, &ci, NULL, &pc);
	*cache = TVK_U(pc);
	return r;
}

VkResult tvk_pipeline_cache_data(tvk_ctx *c, uint64_t cache, void *data, size_t *len) {
	return c->vkGetPipelineCacheData(c->device, TVK_H(VkPipelineCache, cache), len, data);
}

void tvk_destroy_pipeline_cache(tvk_ctx *c, uint64_t cache) {
	c->vkDestroyPipelineCache(c->device, TVK_H(VkPipelineCache, cache), NULL);
}

VkResult tvk_create_descriptor_pool(tvk_ctx *c, uint32_t sets, uint32_t buffers, uint64_t *pool) {
	VkDescriptorPoolSize size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = buffers};
	VkDescriptorPoolCreateInfo ci = {
	    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = sets, .poolSizeCount = 1, .pPoolSizes = &size};
	VkDescriptorPool p = VK_NULL_HANDLE;
	VkResult r = c->vkCreateDescriptorPool(c->device, &ci, NULL, &p);
	*pool = TVK_U(p);
	return r;
}

void tvk_destroy_descriptor_pool(tvk_ctx *c, uint64_t pool) {
	c->vkDestroyDescriptorPool(c->device, TVK_H(VkDescriptorPool, pool), NULL);
}

VkResult tvk_descriptor_set(tvk_ctx *c, uint64_t pool, uint64_t set_layout, uint32_t n, const uint64_t *bufs,
                            const uint64_t *offs, const uint64_t *ranges, uint64_t *set) {
	VkDescriptorSetLayout dsl = TVK_H(VkDescriptorSetLayout, set_layout);
	VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
	                                  .descriptorPool = TVK_H(VkDescriptorPool, pool),
	                                  .descriptorSetCount = 1,
	                                  .pSetLayouts = &dsl};
	VkDescriptorSet s = VK_NULL_HANDLE;
	VkResult r = c->vkAllocateDescriptorSets(c->device, &ai, &s);
	if (r != VK_SUCCESS) return r;
	VkDescriptorBufferInfo info[64];
	VkWriteDescriptorSet w[64];
	if (n > 64) return VK_ERROR_INITIALIZATION_FAILED;
	for (uint32_t i = 0; i < n; i++) {
		info[i] = (VkDescriptorBufferInfo){.buffer = TVK_H(VkBuffer, bufs[i]), .offset = offs[i], .range = ranges[i]};
		w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
		                              .dstSet = s,
		                              .dstBinding = i,
		                              .descriptorCount = 1,
		                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
		                              .pBufferInfo = &info[i]};
	}
	c->vkUpdateDescriptorSets(c->device, n, w, 0, NULL);
	*set = TVK_U(s);
	return VK_SUCCESS;
}

VkResult tvk_command_buffer(tvk_ctx *c, VkCommandBuffer *cb) {
	VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
	                                  .commandPool = c->cmd_pool,
	                                  .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
	                                  .commandBufferCount = 1};
	return c->vkAllocateCommandBuffers(c->device, &ai, cb);
}

void tvk_free_command_buffer(tvk_ctx *c, VkCommandBuffer cb) { c->vkFreeCommandBuffers(c->device, c->cmd_pool, 1, &cb); }

// The one barrier of command lists: every compute or transfer write before
// it is visible to every compute or transfer access after it. An execution
// dependency stalls the pipeline whichever buffers it names, so a global
// memory barrier costs no more than buffer barriers and is one struct.
static void tvk_barrier(tvk_ctx *c, VkCommandBuffer cb, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
	                      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	                      .dstAccessMask = dst_access};
	c->vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0, 1, &mb,
	                        0, NULL, 0, NULL);
}

static const VkPipelineStageFlags tvk_work_stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
static const VkAccessFlags tvk_work_access = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                             VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

VkResult tvk_record(tvk_ctx *c, VkCommandBuffer cb, const tvk_op *ops, size_t n, int once, uint64_t stamps,
                    const char **what) {
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
	                               .flags = once ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0};
	*what = "vkBeginCommandBuffer";
	VkResult r = c->vkBeginCommandBuffer(cb, &bi);
	if (r != VK_SUCCESS) return r;
	VkQueryPool pool = TVK_H(VkQueryPool, stamps);
	uint32_t stamp = 0;
	if (stamps) {
		uint32_t queries = 1;
		for (size_t i = 0; i < n; i++) queries += ops[i].kind != TVK_OP_BARRIER;
		c->vkCmdResetQueryPool(cb, pool, 0, queries);
	}
	// Earlier submissions' writes are made visible to this one's work
	// (queue order alone does not make them visible).
	tvk_barrier(c, cb, tvk_work_stages, tvk_work_access);
	// A timestamp at BOTTOM_OF_PIPE is written when every earlier command
	// has finished, so consecutive stamps bound what each command added.
	if (stamps) c->vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, stamp++);
	VkPipeline bound = VK_NULL_HANDLE;
	for (size_t i = 0; i < n; i++) {
		const tvk_op *o = &ops[i];
		switch (o->kind) {
		case TVK_OP_DISPATCH: {
			VkPipeline p = TVK_H(VkPipeline, o->pipeline);
			if (p != bound) {
				c->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
				bound = p;
			}
			VkDescriptorSet s = TVK_H(VkDescriptorSet, o->set);
			c->vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, TVK_H(VkPipelineLayout, o->layout), 0, 1, &s, 0,
			                           NULL);
			c->vkCmdDispatch(cb, o->x, o->y, o->z);
			break;
		}
		case TVK_OP_COPY: {
			VkBufferCopy region = {.srcOffset = o->src_off, .dstOffset = o->dst_off, .size = o->size};
			c->vkCmdCopyBuffer(cb, TVK_H(VkBuffer, o->src), TVK_H(VkBuffer, o->dst), 1, &region);
			break;
		}
		case TVK_OP_BARRIER:
			tvk_barrier(c, cb, tvk_work_stages, tvk_work_access);
			continue;
		}
		if (stamps) c->vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, stamp++);
	}
	// What the host reads after the fence (downloads) is visible to it.
	tvk_barrier(c, cb, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
	*what = "vkEndCommandBuffer";
	return c->vkEndCommandBuffer(cb);
}

VkResult tvk_create_query_pool(tvk_ctx *c, uint32_t n, uint64_t *pool) {
	VkQueryPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = n};
	VkQueryPool p = VK_NULL_HANDLE;
	VkResult r = c->vkCreateQueryPool(c->device, &ci, NULL, &p);
	*pool = TVK_U(p);
	return r;
}

void tvk_destroy_query_pool(tvk_ctx *c, uint64_t pool) { c->vkDestroyQueryPool(c->device, TVK_H(VkQueryPool, pool), NULL); }

VkResult tvk_timestamps(tvk_ctx *c, uint64_t pool, uint32_t n, uint64_t *out) {
	return c->vkGetQueryPoolResults(c->device, TVK_H(VkQueryPool, pool), 0, n, n * sizeof *out, out, sizeof *out,
	                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
}

VkResult tvk_create_fence(tvk_ctx *c, uint64_t *fence) {
	VkFenceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	VkFence f = VK_NULL_HANDLE;
	VkResult r = c->vkCreateFence(c->device, &ci, NULL, &f);
	*fence = TVK_U(f);
	return r;
}

void tvk_destroy_fence(tvk_ctx *c, uint64_t fence) { c->vkDestroyFence(c->device, TVK_H(VkFence, fence), NULL); }

VkResult tvk_submit(tvk_ctx *c, VkCommandBuffer cb, uint64_t fence) {
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
	return c->vkQueueSubmit(c->queue, 1, &si, TVK_H(VkFence, fence));
}

VkResult tvk_fence_status(tvk_ctx *c, uint64_t fence) { return c->vkGetFenceStatus(c->device, TVK_H(VkFence, fence)); }

VkResult tvk_wait(tvk_ctx *c, const uint64_t *fences, uint32_t n, uint64_t timeout_ns) {
	VkFence fs[64];
	if (n > 64) return VK_ERROR_INITIALIZATION_FAILED; // the caller waits for fewer
	for (uint32_t i = 0; i < n; i++) fs[i] = TVK_H(VkFence, fences[i]);
	return c->vkWaitForFences(c->device, n, fs, VK_TRUE, timeout_ns);
}

VkResult tvk_reset_fence(tvk_ctx *c, uint64_t fence) {
	VkFence f = TVK_H(VkFence, fence);
	return c->vkResetFences(c->device, 1, &f);
}

VkResult tvk_wait_idle(tvk_ctx *c) { return c->vkDeviceWaitIdle(c->device); }
