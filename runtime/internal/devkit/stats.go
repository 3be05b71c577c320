package devkit

import "time"

// Stats counts what a GPU device did, for tests and benchmarks.
type Stats struct {
	Dispatches  int // dispatches recorded
	Submits     int // submissions of recorded work (queue submits, committed command buffers)
	Allocs      int // device buffers made
	PoolHits    int // buffers reused from the pool
	Pipelines   int // pipelines compiled
	KernelsMade int // kernels generated
	// CompileTime is the time spent generating kernels and compiling
	// their pipelines.
	CompileTime time.Duration
	// BufferBytes is the size of the buffers an Allocator holds (in use
	// and pooled), PeakBufferBytes its largest value so far.
	BufferBytes, PeakBufferBytes int64
}
