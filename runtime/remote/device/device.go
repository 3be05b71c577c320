// Package device is the device side of tapml's remote protocol
// (runtime/remote/proto): it decodes the host's requests, checks them, keeps
// each session's buffers and kernels by the ids the host chose and the
// weights cached by content hash, and runs kernels on a Backend: the native
// WebGPU device (Native, through runtime/webgpu), tapml's own Vulkan device
// (Vulkan, through runtime/vulkan, the kernels translated to SPIR-V) or the
// browser's WebGPU (runtime/remote/browser/wasm). The same code serves all
// three, so what the native server accepts the browser page accepts too.
//
// The session never converts data: under f16 compute the host sends
// f16 tensors and kernels whose bindings say f16 (proto), and a device
// takes kernels that enable f16 only where it lists shader-f16.
//
// Session.Handle takes one frame and returns one reply frame; it never
// panics on input (a panic inside a backend becomes a CodeInternal error
// reply), and every size is checked before anything is allocated.
package device

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sort"
	"sync"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/runtime/remote/proto"
)

// Buffer is a backend's handle of a device buffer.
type Buffer = any

// Backend runs kernels on one GPU. Its methods are called by one session at
// a time or concurrently by several (the native backend is safe for
// concurrent use; the browser serves one session at a time).
type Backend interface {
	// Info describes the device for the handshake.
	Info() proto.DeviceInfo
	// Upload makes a buffer holding data (of dtype and shape).
	Upload(dt ir.DType, shape []int, data []byte) (Buffer, error)
	// Compile builds (or finds in its cache) the pipeline of a kernel, so
	// that a bad kernel fails here with the compiler's message.
	Compile(k *codegen.Kernel) error
	// Launch runs kernel k (compiled before) on the inputs and returns one
	// buffer per output; an output bound ReadWrite to an input is that
	// input's buffer. It may only record the work.
	Launch(node *ir.Node, k *codegen.Kernel, in []Buffer) ([]Buffer, error)
	// Download returns length bytes of b from offset, after pending work.
	Download(b Buffer, offset, length int64) ([]byte, error)
	// Sync waits until all work has finished.
	Sync() error
	// Free releases a buffer.
	Free(b Buffer)
}

// PoolReleaser is a Backend that keeps freed buffers for reuse. Session.Close
// calls ReleasePool after freeing the session's buffers, so that the next
// session's buffers are new (WebGPU zeroes them) and never hold what an
// earlier host left.
type PoolReleaser interface {
	ReleasePool()
}

// Options configure a Core.
type Options struct {
	// CacheBytes bounds the bytes of cached weights no session uses
	// (default 1 GiB); weights in use are never evicted.
	CacheBytes int64
	// MemoryBytes bounds the bytes of every buffer of the core: the
	// sessions' buffers, uploads in progress (counted as their bytes
	// arrive) and cached weights; idle cached weights are evicted to make
	// room (default 16 GiB).
	MemoryBytes int64
	// MaxBuffers bounds the buffer ids of one session (default 1<<20).
	MaxBuffers int
	// MaxKernels bounds the kernel ids of one session (default 1<<16).
	MaxKernels int
	// UncheckedKernels skips CheckKernel, so that a kernel reaches the
	// backend's compiler as sent. Only tests of crash isolation set it.
	UncheckedKernels bool
}

// Core is a device shared by sessions: its backend, the weight cache and
// the set of kernels known to compile.
type Core struct {
	be   Backend
	info proto.DeviceInfo
	opts Options

	mu       sync.Mutex
	weights  map[[32]byte]*entry
	cached   int64 // bytes of cached weights
	used     int64 // bytes of all buffers: MemoryBytes bounds it
	tick     uint64
	compiled map[[32]byte]bool // kernels (source and layout) that compiled
}

// entry is a cached weight.
type entry struct {
	key   [32]byte
	h     Buffer
	bytes int64
	refs  int // session ids bound to it
	last  uint64
}

// New returns a device core over a backend.
func New(be Backend, opts Options) *Core {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 1 << 30
	}
	if opts.MemoryBytes <= 0 {
		opts.MemoryBytes = 16 << 30
	}
	if opts.MaxBuffers <= 0 {
		opts.MaxBuffers = 1 << 20
	}
	if opts.MaxKernels <= 0 {
		opts.MaxKernels = 1 << 16
	}
	info := be.Info()
	return &Core{be: be, info: info, opts: opts, weights: map[[32]byte]*entry{}, compiled: map[[32]byte]bool{}}
}

// Info describes the device.
func (c *Core) Info() proto.DeviceInfo { return c.info }

// CachedWeights returns the number and bytes of cached weights.
func (c *Core) CachedWeights() (n int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.weights), c.cached
}

// evict drops unused weights, least recently used first, until the cache
// fits its budget (must hold c.mu).
func (c *Core) evict() { c.evictUntil(c.opts.CacheBytes, c.opts.MemoryBytes) }

// evictUntil drops unused weights, least recently used first, until at
// most cacheBytes are cached and at most memBytes used (must hold c.mu).
func (c *Core) evictUntil(cacheBytes, memBytes int64) {
	if c.cached <= cacheBytes && c.used <= memBytes {
		return
	}
	var idle []*entry
	for _, e := range c.weights {
		if e.refs == 0 {
			idle = append(idle, e)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].last < idle[j].last })
	for _, e := range idle {
		if c.cached <= cacheBytes && c.used <= memBytes {
			break
		}
		delete(c.weights, e.key)
		c.cached -= e.bytes
		c.used -= e.bytes
		c.be.Free(e.h)
	}
}

// reserve counts n more bytes against MemoryBytes, evicting idle weights
// if that makes room; it reports whether they fit.
func (c *Core) reserve(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used+n > c.opts.MemoryBytes {
		c.evictUntil(c.opts.CacheBytes, c.opts.MemoryBytes-n)
	}
	if c.used+n > c.opts.MemoryBytes {
		return false
	}
	c.used += n
	return true
}

// unreserve gives back bytes counted by reserve.
func (c *Core) unreserve(n int64) {
	c.mu.Lock()
	c.used -= n
	c.mu.Unlock()
}

// Used returns the bytes counted against MemoryBytes.
func (c *Core) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// overBudget is the error of a request that would pass MemoryBytes.
func (c *Core) overBudget(what string, n int64) *proto.Error {
	return proto.Errorf(proto.CodeTooLarge, "%s of %d bytes: the device's memory budget of %d bytes is used up", what, n, c.opts.MemoryBytes)
}

// Session is one host's view of the device: its buffers and kernels by id.
type Session struct {
	c       *Core
	bufs    map[uint32]*sbuf
	kernels map[uint32]*codegen.Kernel
}

// sbuf is a session's buffer: a private buffer, a cached weight, or an
// upload in progress.
type sbuf struct {
	h      Buffer
	bytes  int64
	weight *entry
	up     *upload
}

// upload is a tensor arriving in chunks. Its bytes are held (and counted
// against MemoryBytes) as they arrive, not at the first chunk's declared
// size.
type upload struct {
	dt    proto.DType
	shape []uint32
	data  []byte
	total int64
	cache bool
	hash  [32]byte
	h     hash.Hash
}

// NewSession starts a session.
func (c *Core) NewSession() *Session {
	return &Session{c: c, bufs: map[uint32]*sbuf{}, kernels: map[uint32]*codegen.Kernel{}}
}

// Close frees the session's buffers (cached weights stay cached) and the
// backend's pool of freed buffers (PoolReleaser). A backend that pools
// buffers must serve one session at a time.
func (s *Session) Close() {
	ids := make([]uint32, 0, len(s.bufs))
	for id := range s.bufs {
		ids = append(ids, id)
	}
	for _, id := range ids {
		s.free(id)
	}
	s.kernels = map[uint32]*codegen.Kernel{}
	s.c.mu.Lock()
	s.c.evict()
	s.c.mu.Unlock()
	if pr, ok := s.c.be.(PoolReleaser); ok {
		pr.ReleasePool()
	}
}

// Buffers returns the number of live buffer ids (for tests).
func (s *Session) Buffers() int { return len(s.bufs) }

func (s *Session) free(id uint32) {
	b := s.bufs[id]
	if b == nil {
		return
	}
	delete(s.bufs, id)
	switch {
	case b.weight != nil:
		s.c.mu.Lock()
		b.weight.refs--
		if b.weight.refs == 0 {
			s.c.evict()
		}
		s.c.mu.Unlock()
	case b.h != nil:
		s.c.be.Free(b.h)
		s.c.unreserve(b.bytes)
	case b.up != nil:
		s.c.unreserve(int64(len(b.up.data)))
	}
}

func failf(format string, args ...any) *proto.Error {
	return proto.Errorf(proto.CodeFailed, format, args...)
}

// Handle runs one request frame and returns the reply frame.
func (s *Session) Handle(frame []byte) (reply []byte) {
	id, m, err := proto.Decode(frame)
	if err != nil {
		code := proto.CodeMalformed
		if errors.Is(err, proto.ErrTooLarge) {
			code = proto.CodeTooLarge
		}
		return proto.Encode(id, proto.Errorf(code, "malformed request: %v", err))
	}
	defer func() {
		if r := recover(); r != nil {
			reply = proto.Encode(id, proto.Errorf(proto.CodeInternal, "internal error on the device handling a %s request: %v", m.Type(), r))
		}
	}()
	return proto.Encode(id, s.handle(m))
}

func (s *Session) handle(m proto.Msg) proto.Msg {
	switch m := m.(type) {
	case *proto.Query:
		return s.query(m)
	case *proto.Upload:
		if err := s.upload(m); err != nil {
			return err
		}
	case *proto.Compile:
		if err := s.compile(m); err != nil {
			return err
		}
	case *proto.Batch:
		if err := s.batch(m); err != nil {
			return err
		}
	case *proto.Download:
		return s.download(m)
	case *proto.Sync:
		if err := s.c.be.Sync(); err != nil {
			return failf("sync: %v", err)
		}
	case *proto.Reset:
		s.Close()
	default:
		return proto.Errorf(proto.CodeMalformed, "unexpected %s message in a session", m.Type())
	}
	return &proto.OK{}
}

func (s *Session) newID(id uint32) *proto.Error {
	if _, ok := s.bufs[id]; ok {
		return failf("buffer id %d is already in use", id)
	}
	if len(s.bufs) >= s.c.opts.MaxBuffers {
		return proto.Errorf(proto.CodeTooLarge, "the session holds %d buffers, the limit", len(s.bufs))
	}
	return nil
}

func (s *Session) query(m *proto.Query) proto.Msg {
	found := make([]bool, len(m.Items))
	for _, it := range m.Items {
		if err := s.newID(it.Buf); err != nil {
			return err
		}
	}
	seen := map[uint32]bool{}
	for _, it := range m.Items {
		if seen[it.Buf] {
			return failf("query names buffer id %d twice", it.Buf)
		}
		seen[it.Buf] = true
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	for i, it := range m.Items {
		e := s.c.weights[it.Hash]
		if e == nil {
			continue
		}
		s.c.tick++
		e.refs++
		e.last = s.c.tick
		s.bufs[it.Buf] = &sbuf{h: e.h, bytes: e.bytes, weight: e}
		found[i] = true
	}
	return &proto.QueryOK{Found: found}
}

func shapeInts(s []uint32) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func (s *Session) upload(m *proto.Upload) *proto.Error {
	total, err := proto.Bytes(m.DType, m.Shape)
	if err != nil {
		return failf("upload to buffer %d: %v", m.Buf, err)
	}
	b := s.bufs[m.Buf]
	if m.Offset == 0 {
		if perr := s.newID(m.Buf); perr != nil {
			return perr
		}
		if lim := s.c.info.Limits.MaxBufferSize; lim > 0 && uint64(total) > lim {
			return failf("upload to buffer %d: %s%v is %d bytes, more than the device's max buffer size %d", m.Buf, m.DType, m.Shape, total, lim)
		}
		if total > s.c.opts.MemoryBytes {
			return s.c.overBudget("upload", total)
		}
		up := &upload{dt: m.DType, shape: m.Shape, total: total, cache: m.Cache, hash: m.Hash}
		if m.Cache {
			up.h = proto.WeightHash(m.DType, m.Shape)
		}
		b = &sbuf{bytes: total, up: up}
		s.bufs[m.Buf] = b
	} else if b == nil || b.up == nil {
		return failf("upload to buffer %d at offset %d: no upload in progress", m.Buf, m.Offset)
	}
	up := b.up
	if up.dt != m.DType || !slices.Equal(up.shape, m.Shape) || up.cache != m.Cache || up.hash != m.Hash {
		s.abandon(m.Buf)
		return failf("upload to buffer %d: a chunk describes another tensor", m.Buf)
	}
	if int64(m.Offset) != int64(len(up.data)) {
		s.abandon(m.Buf)
		return failf("upload to buffer %d: chunk at offset %d, expected %d", m.Buf, m.Offset, len(up.data))
	}
	if !s.c.reserve(int64(len(m.Data))) {
		s.abandon(m.Buf)
		return s.c.overBudget("upload", total)
	}
	up.data = appendChunk(up.data, m.Data, total)
	if up.h != nil {
		up.h.Write(m.Data)
	}
	if int64(len(up.data)) < total {
		return nil
	}
	b.up = nil // the reserved bytes now belong to the buffer
	var key [32]byte
	if up.cache {
		up.h.Sum(key[:0])
		if key != up.hash {
			s.c.unreserve(total)
			delete(s.bufs, m.Buf)
			return failf("upload to buffer %d: the content hash is %x, the host said %x", m.Buf, key[:8], up.hash[:8])
		}
		// Another session may have cached it meanwhile: share that one.
		if s.shareCached(b, key) {
			s.c.unreserve(total)
			return nil
		}
	}
	h, err := s.c.be.Upload(up.dt.IR(), shapeInts(up.shape), up.data)
	if err != nil {
		s.c.unreserve(total)
		delete(s.bufs, m.Buf)
		return failf("upload of %s%v to buffer %d: %v", up.dt, up.shape, m.Buf, err)
	}
	b.h = h
	if up.cache {
		if s.shareCached(b, key) {
			// Another session cached it while this upload ran: drop this
			// copy.
			s.c.be.Free(h)
			s.c.unreserve(total)
			return nil
		}
		s.c.mu.Lock()
		s.c.tick++
		e := &entry{key: key, h: h, bytes: total, refs: 1, last: s.c.tick}
		s.c.weights[key] = e
		s.c.cached += total // its bytes stay counted in used, now as the entry's
		b.weight = e
		s.c.evict()
		s.c.mu.Unlock()
	}
	return nil
}

// shareCached binds b to the cached weight with key, if there is one.
func (s *Session) shareCached(b *sbuf, key [32]byte) bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	e := s.c.weights[key]
	if e == nil {
		return false
	}
	s.c.tick++
	e.refs++
	e.last = s.c.tick
	b.h, b.weight = e.h, e
	return true
}

// appendChunk appends a chunk to the bytes received so far, growing the
// buffer with what arrives (at most doubling, never past total), so that a
// tensor that is declared but never sent costs nothing.
func appendChunk(data, chunk []byte, total int64) []byte {
	if len(data) == 0 && int64(len(chunk)) == total {
		return chunk // the whole tensor in one chunk, a copy the decoder made
	}
	need := len(data) + len(chunk)
	if need > cap(data) {
		c := int(min(total, int64(max(need, 2*cap(data)))))
		grown := make([]byte, len(data), c)
		copy(grown, data)
		data = grown
	}
	return append(data, chunk...)
}

// abandon forgets a buffer whose upload failed.
func (s *Session) abandon(id uint32) {
	if b := s.bufs[id]; b != nil && b.h == nil {
		s.free(id)
	}
}

func kernelKey(m *proto.Compile) [32]byte {
	h := sha256.New()
	c := *m
	c.Kernel, c.Node = 0, 0
	h.Write(proto.Encode(0, &c))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (s *Session) compile(m *proto.Compile) *proto.Error {
	fail := func(format string, args ...any) *proto.Error {
		e := failf("compile: "+format, args...)
		e.Node = m.Node
		return e
	}
	if _, ok := s.kernels[m.Kernel]; ok {
		return fail("kernel id %d is already in use", m.Kernel)
	}
	if len(s.kernels) >= s.c.opts.MaxKernels {
		return proto.Errorf(proto.CodeTooLarge, "the session holds %d kernels, the limit", len(s.kernels))
	}
	if m.Language != "wgsl" {
		return fail("language %q: this device runs wgsl", m.Language)
	}
	if m.Entry == "" || len(m.Source) == 0 {
		return fail("no source or entry point")
	}
	if !s.c.opts.UncheckedKernels {
		if err := CheckKernel(m.Source, m.Entry, s.c.info); err != nil {
			return fail("%v", err)
		}
	}
	lim := s.c.info.Limits
	inv := uint64(1)
	for i, w := range m.Workgroup {
		if w == 0 {
			return fail("workgroup size %v has a zero", m.Workgroup)
		}
		inv *= uint64(w)
		if max := [3]uint32{lim.MaxWorkgroupSizeX, lim.MaxWorkgroupSizeY, lim.MaxWorkgroupSizeZ}[i]; max > 0 && w > max {
			return fail("workgroup size %v exceeds the device's %d in dimension %d", m.Workgroup, max, i)
		}
	}
	if lim.MaxInvocationsPerWorkgroup > 0 && inv > uint64(lim.MaxInvocationsPerWorkgroup) {
		return fail("workgroup of %d invocations exceeds the device's %d", inv, lim.MaxInvocationsPerWorkgroup)
	}
	for _, g := range m.Grid {
		if lim.MaxWorkgroupsPerDimension > 0 && g > lim.MaxWorkgroupsPerDimension {
			return fail("grid %v exceeds the device's %d workgroups per dimension", m.Grid, lim.MaxWorkgroupsPerDimension)
		}
	}
	if lim.MaxStorageBuffersPerShaderStage > 0 && len(m.Bindings) > int(lim.MaxStorageBuffersPerShaderStage) {
		return fail("%d bindings exceed the device's %d storage buffers", len(m.Bindings), lim.MaxStorageBuffersPerShaderStage)
	}
	op, ok := ir.OpNamed(m.Op)
	if !ok {
		return fail("unknown op %q", m.Op)
	}
	k := &codegen.Kernel{Language: m.Language, Op: op, NodeID: int(m.Node), Source: m.Source, Entry: m.Entry,
		WorkgroupSize: [3]int{int(m.Workgroup[0]), int(m.Workgroup[1]), int(m.Workgroup[2])},
		Grid:          [3]int{int(m.Grid[0]), int(m.Grid[1]), int(m.Grid[2])}}
	for i, b := range m.Bindings {
		shape := make(ir.Shape, len(b.Shape))
		for j, d := range b.Shape {
			shape[j] = ir.D(int64(d))
		}
		acc := [...]codegen.Access{codegen.Read, codegen.Write, codegen.ReadWrite}[b.Access]
		k.Bindings = append(k.Bindings, codegen.Binding{Index: i, Name: fmt.Sprintf("b%d", i), Access: acc,
			Type: ir.T(b.DType.IR(), shape), Input: int(b.Input), Output: int(b.Output)})
	}
	if err := devkit.CheckLayout(k); err != nil {
		return fail("%v", err)
	}
	key := kernelKey(m)
	s.c.mu.Lock()
	known := s.c.compiled[key]
	s.c.mu.Unlock()
	if !known {
		if err := s.c.be.Compile(k); err != nil {
			return fail("%v", err)
		}
		s.c.mu.Lock()
		s.c.compiled[key] = true
		s.c.mu.Unlock()
	}
	s.kernels[m.Kernel] = k
	return nil
}

// batch runs commands in order. After a failed launch the other launches
// are skipped; frees still run, so that nothing leaks.
func (s *Session) batch(m *proto.Batch) *proto.Error {
	var first *proto.Error
	for i, c := range m.Cmds {
		switch c.Kind {
		case proto.CmdFree:
			s.free(c.Buf)
		case proto.CmdLaunch:
			if first != nil {
				continue
			}
			if err := s.launch(c); err != nil {
				err.Index, err.Node = uint32(i), c.Node
				first = err
			}
		}
	}
	return first
}

func (s *Session) launch(c proto.Cmd) *proto.Error {
	k := s.kernels[c.Kernel]
	if k == nil {
		return failf("launch of node #%d: kernel %d was not compiled", c.Node, c.Kernel)
	}
	fail := func(format string, args ...any) *proto.Error {
		return failf("launch of %s (node #%d): "+format, append([]any{k.Op, c.Node}, args...)...)
	}
	in := make([]Buffer, len(c.In))
	for i, id := range c.In {
		b := s.bufs[id]
		if b == nil || b.h == nil {
			return fail("input %d: buffer %d does not exist", i, id)
		}
		in[i] = b.h
	}
	nout := 0
	for _, b := range k.Bindings {
		nout = max(nout, b.Output+1)
		if b.Input >= len(in) {
			return fail("the kernel reads input %d of %d", b.Input, len(in))
		}
		if b.Input < 0 {
			continue
		}
		ib := s.bufs[c.In[b.Input]]
		if need := int64(b.Type.Bytes()); need > ib.bytes {
			return fail("binding %d expects %s (%d bytes); input %d holds %d", b.Index, b.Type, need, b.Input, ib.bytes)
		}
		if b.Access != codegen.Read && ib.weight != nil {
			return fail("binding %d writes input %d, a cached weight (read-only)", b.Index, b.Input)
		}
	}
	if len(c.Out) != nout {
		return fail("%d output ids for %d outputs", len(c.Out), nout)
	}
	var fresh int64
	for _, b := range k.Bindings {
		if b.Output < 0 {
			continue
		}
		id := c.Out[b.Output]
		if b.Input >= 0 {
			if id != c.In[b.Input] {
				return fail("output %d is input %d updated in place: its id must be %d, not %d", b.Output, b.Input, c.In[b.Input], id)
			}
			continue
		}
		if err := s.newID(id); err != nil {
			return fail("output %d: %s", b.Output, err.Message)
		}
		for j, other := range c.Out {
			if j != b.Output && other == id {
				return fail("outputs %d and %d share id %d", b.Output, j, id)
			}
		}
		fresh += int64(b.Type.Bytes())
	}
	if !s.c.reserve(fresh) {
		e := s.c.overBudget(fmt.Sprintf("launch of node #%d: outputs", c.Node), fresh)
		return e
	}
	node := &ir.Node{ID: int(c.Node), Op: k.Op}
	outs, err := s.c.be.Launch(node, k, in)
	if err == nil && len(outs) != nout {
		err = fmt.Errorf("the backend returned %d outputs for %d", len(outs), nout)
	}
	if err != nil {
		s.c.unreserve(fresh)
		return fail("%v", err)
	}
	for _, b := range k.Bindings {
		if b.Output >= 0 && b.Input < 0 {
			s.bufs[c.Out[b.Output]] = &sbuf{h: outs[b.Output], bytes: int64(b.Type.Bytes())}
		}
	}
	return nil
}

func (s *Session) download(m *proto.Download) proto.Msg {
	b := s.bufs[m.Buf]
	if b == nil || b.h == nil {
		return failf("download: buffer %d does not exist", m.Buf)
	}
	if m.Offset > uint64(b.bytes) || uint64(m.Length) > uint64(b.bytes)-m.Offset {
		return failf("download of %d bytes at %d: buffer %d holds %d", m.Length, m.Offset, m.Buf, b.bytes)
	}
	data, err := s.c.be.Download(b.h, int64(m.Offset), int64(m.Length))
	if err != nil {
		return failf("download of buffer %d: %v", m.Buf, err)
	}
	if len(data) != int(m.Length) {
		return failf("download of buffer %d: the backend returned %d bytes, not %d", m.Buf, len(data), m.Length)
	}
	return &proto.Data{Data: data}
}

// Authorized compares a token with the expected one in constant time (it
// compares their SHA-256 digests, so not even the length leaks).
func Authorized(want, got string) bool {
	a, b := sha256.Sum256([]byte(want)), sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
