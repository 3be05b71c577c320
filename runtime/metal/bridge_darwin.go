//go:build darwin && cgo

package metal

/*
#cgo CFLAGS: -x objective-c -fobjc-arc
#cgo LDFLAGS: -framework Metal -framework Foundation
#include <stdlib.h>
#include <string.h>
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

// The device, its queue, the open command buffer and encoder, and the
// committed command buffers not waited for. Objects are held as retained
// void pointers (__bridge_retained) and released with CFBridgingRelease.
typedef struct {
	void *dev;      // id<MTLDevice>
	void *queue;    // id<MTLCommandQueue>
	void *cmd;      // id<MTLCommandBuffer>, open, or NULL
	void *enc;      // id<MTLComputeCommandEncoder> of cmd, or NULL
	void *inflight; // NSMutableArray<id<MTLCommandBuffer>>
} tm_ctx;

static char *tm_strdup(NSString *s, const char *fallback) {
	const char *u = s != nil ? [s UTF8String] : NULL;
	return strdup(u != NULL ? u : fallback);
}

static void tm_release(void *obj) {
	@autoreleasepool {
		if (obj != NULL) {
			CFBridgingRelease(obj);
		}
	}
}

static tm_ctx *tm_open(char **name, char **err) {
	@autoreleasepool {
		id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
		if (dev == nil) {
			*err = strdup("no Metal device (MTLCreateSystemDefaultDevice returned nil)");
			return NULL;
		}
		id<MTLCommandQueue> q = [dev newCommandQueue];
		if (q == nil) {
			*err = strdup("newCommandQueue failed");
			return NULL;
		}
		tm_ctx *c = calloc(1, sizeof *c);
		if (c == NULL) {
			*err = strdup("out of memory");
			return NULL;
		}
		c->dev = (__bridge_retained void *)dev;
		c->queue = (__bridge_retained void *)q;
		c->inflight = (__bridge_retained void *)[NSMutableArray array];
		*name = tm_strdup(dev.name, "unknown GPU");
		return c;
	}
}

static void *tm_buffer(tm_ctx *c, size_t n) {
	@autoreleasepool {
		id<MTLDevice> dev = (__bridge id<MTLDevice>)c->dev;
		id<MTLBuffer> b = [dev newBufferWithLength:n options:MTLResourceStorageModeShared];
		return b != nil ? (__bridge_retained void *)b : NULL;
	}
}

static void *tm_contents(void *buf) {
	return [(__bridge id<MTLBuffer>)buf contents];
}

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static void *tm_pipeline(tm_ctx *c, const char *src, const char *entry, int *max_threads, char **err) {
	@autoreleasepool {
		id<MTLDevice> dev = (__bridge id<MTLDevice>)c->dev;
		MTLCompileOptions *opts = [MTLCompileOptions new];
		// The kernels need IEEE semantics (NaN tests, no reassociation).
		// fastMathEnabled is deprecated for mathMode in the macOS 15 SDK but
		// still honoured.
		opts.fastMathEnabled = NO;
		NSError *e = nil;
		NSString *s = [NSString stringWithUTF8String:src];
		id<MTLLibrary> lib = [dev newLibraryWithSource:s options:opts error:&e];
		if (lib == nil) {
			*err = tm_strdup(e.localizedDescription, "newLibraryWithSource failed");
			return NULL;
		}
		id<MTLFunction> fn = [lib newFunctionWithName:[NSString stringWithUTF8String:entry]];
		if (fn == nil) {
			*err = strdup("the library has no kernel of the entry's name");
			return NULL;
		}
		id<MTLComputePipelineState> p = [dev newComputePipelineStateWithFunction:fn error:&e];
		if (p == nil) {
			*err = tm_strdup(e.localizedDescription, "newComputePipelineStateWithFunction failed");
			return NULL;
		}
		*max_threads = (int)p.maxTotalThreadsPerThreadgroup;
		return (__bridge_retained void *)p;
	}
}
#pragma clang diagnostic pop

static int tm_dispatch(tm_ctx *c, void *pipe, void **bufs, int nbufs,
		unsigned gx, unsigned gy, unsigned gz, unsigned tx, unsigned ty, unsigned tz, char **err) {
	@autoreleasepool {
		if (c->cmd == NULL) {
			id<MTLCommandQueue> q = (__bridge id<MTLCommandQueue>)c->queue;
			id<MTLCommandBuffer> cb = [q commandBuffer];
			if (cb == nil) {
				*err = strdup("commandBuffer failed");
				return -1;
			}
			id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoder]; // serial dispatch
			if (enc == nil) {
				*err = strdup("computeCommandEncoder failed");
				return -1;
			}
			c->cmd = (__bridge_retained void *)cb;
			c->enc = (__bridge_retained void *)enc;
		}
		id<MTLComputeCommandEncoder> enc = (__bridge id<MTLComputeCommandEncoder>)c->enc;
		[enc setComputePipelineState:(__bridge id<MTLComputePipelineState>)pipe];
		for (int i = 0; i < nbufs; i++) {
			[enc setBuffer:(__bridge id<MTLBuffer>)bufs[i] offset:0 atIndex:i];
		}
		[enc dispatchThreadgroups:MTLSizeMake(gx, gy, gz) threadsPerThreadgroup:MTLSizeMake(tx, ty, tz)];
		return 0;
	}
}

static void tm_commit(tm_ctx *c) {
	@autoreleasepool {
		if (c->cmd == NULL) {
			return;
		}
		id<MTLComputeCommandEncoder> enc = (__bridge_transfer id<MTLComputeCommandEncoder>)c->enc;
		id<MTLCommandBuffer> cb = (__bridge_transfer id<MTLCommandBuffer>)c->cmd;
		c->enc = NULL;
		c->cmd = NULL;
		[enc endEncoding];
		[cb commit];
		[(__bridge NSMutableArray *)c->inflight addObject:cb];
	}
}

// tm_wait waits for every committed command buffer, in order, and returns
// the first one's error (NULL when all completed).
static char *tm_wait(tm_ctx *c) {
	@autoreleasepool {
		NSMutableArray *inflight = (__bridge NSMutableArray *)c->inflight;
		char *err = NULL;
		for (id<MTLCommandBuffer> cb in inflight) {
			[cb waitUntilCompleted];
			if (err == NULL && cb.status == MTLCommandBufferStatusError) {
				err = tm_strdup(cb.error.localizedDescription, "command buffer failed");
			}
		}
		[inflight removeAllObjects];
		return err;
	}
}

static void tm_close(tm_ctx *c) {
	@autoreleasepool {
		if (c->enc != NULL) {
			id<MTLComputeCommandEncoder> enc = (__bridge_transfer id<MTLComputeCommandEncoder>)c->enc;
			[enc endEncoding];
		}
		tm_release(c->cmd);
		tm_release(c->inflight);
		tm_release(c->queue);
		tm_release(c->dev);
		free(c);
	}
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// cgoBridge is the bridge to Metal.
type cgoBridge struct {
	c   *C.tm_ctx
	gpu string
}

// Open opens the system's default Metal device.
func Open(opts Options) (*Device, error) {
	if _, err := opts.precision(); err != nil {
		return nil, err
	}
	var name, cerr *C.char
	c := C.tm_open(&name, &cerr)
	if c == nil {
		return nil, errors.New("metal: " + takeString(cerr))
	}
	return newDevice(&cgoBridge{c: c, gpu: takeString(name)}, opts), nil
}

// takeString converts a malloc'ed C string and frees it.
func takeString(s *C.char) string {
	if s == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s)
}

func (b *cgoBridge) name() string { return b.gpu }

func (b *cgoBridge) newBuffer(size int) (unsafe.Pointer, error) {
	h := C.tm_buffer(b.c, C.size_t(size))
	if h == nil {
		return nil, errors.New("newBufferWithLength failed (out of GPU memory?)")
	}
	return h, nil
}

func (b *cgoBridge) contents(buf unsafe.Pointer, size int) []byte {
	return unsafe.Slice((*byte)(C.tm_contents(buf)), size)
}

func (b *cgoBridge) compile(src []byte, entry string) (unsafe.Pointer, int, error) {
	csrc, centry := C.CString(string(src)), C.CString(entry)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(centry))
	var maxThreads C.int
	var cerr *C.char
	p := C.tm_pipeline(b.c, csrc, centry, &maxThreads, &cerr)
	if p == nil {
		return nil, 0, errors.New(takeString(cerr))
	}
	return p, int(maxThreads), nil
}

func (b *cgoBridge) dispatch(pipe unsafe.Pointer, bufs []unsafe.Pointer, grid, threads [3]int) error {
	// The handles are C pointers; C gets a C copy of the array (cgo forbids
	// passing Go memory that holds pointers).
	n := len(bufs)
	mem := C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(unsafe.Pointer(nil))))
	defer C.free(mem)
	copy(unsafe.Slice((*unsafe.Pointer)(mem), n), bufs)
	var cerr *C.char
	rc := C.tm_dispatch(b.c, pipe, (*unsafe.Pointer)(mem), C.int(n),
		C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]), C.uint(threads[0]), C.uint(threads[1]), C.uint(threads[2]), &cerr)
	if rc != 0 {
		return errors.New(takeString(cerr))
	}
	return nil
}

func (b *cgoBridge) commit() { C.tm_commit(b.c) }

func (b *cgoBridge) wait() error {
	if e := C.tm_wait(b.c); e != nil {
		return errors.New(takeString(e))
	}
	return nil
}

func (b *cgoBridge) release(obj unsafe.Pointer) { C.tm_release(obj) }

func (b *cgoBridge) close() {
	C.tm_close(b.c)
	b.c = nil
}
