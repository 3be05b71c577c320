package device

import (
	"strings"
	"sync"
	"testing"

	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/remote/proto"
)

// fake is a backend that keeps buffers in host memory; its "kernel" copies
// input 0 into output 0 (or adds 1 to each byte of a ReadWrite binding).
type fake struct {
	live     map[*[]byte]bool
	compiled int
	synced   int
}

func newFake() *fake { return &fake{live: map[*[]byte]bool{}} }

func (f *fake) Info() proto.DeviceInfo {
	return proto.DeviceInfo{Name: "fake", Limits: proto.Limits{MaxInvocationsPerWorkgroup: 256, MaxWorkgroupSizeX: 256,
		MaxWorkgroupSizeY: 256, MaxWorkgroupSizeZ: 64, MaxWorkgroupsPerDimension: 65535, MaxStorageBuffersPerShaderStage: 8, MaxBufferSize: 1 << 20}}
}

func (f *fake) Upload(dt ir.DType, shape []int, data []byte) (Buffer, error) {
	b := append([]byte{}, data...)
	f.live[&b] = true
	return &b, nil
}

func (f *fake) Compile(k *codegen.Kernel) error {
	if strings.Contains(string(k.Source), "syntax error") {
		return errBad
	}
	f.compiled++
	return nil
}

type bad struct{}

func (bad) Error() string { return "3:7: syntax error" }

var errBad = bad{}

func (f *fake) Launch(n *ir.Node, k *codegen.Kernel, in []Buffer) ([]Buffer, error) {
	var outs []Buffer
	for _, b := range k.Bindings {
		if b.Output < 0 {
			continue
		}
		for len(outs) <= b.Output {
			outs = append(outs, nil)
		}
		if b.Input >= 0 {
			p := in[b.Input].(*[]byte)
			for i := range *p {
				(*p)[i]++
			}
			outs[b.Output] = p
			continue
		}
		o := make([]byte, b.Type.Bytes())
		copy(o, *in[0].(*[]byte))
		f.live[&o] = true
		outs[b.Output] = &o
	}
	return outs, nil
}

func (f *fake) Download(b Buffer, off, n int64) ([]byte, error) {
	return append([]byte{}, (*b.(*[]byte))[off:off+n]...), nil
}
func (f *fake) Sync() error { f.synced++; return nil }
func (f *fake) Free(b Buffer) {
	p := b.(*[]byte)
	if !f.live[p] {
		panic("double free")
	}
	delete(f.live, p)
}

func call(t *testing.T, s *Session, m proto.Msg) proto.Msg {
	t.Helper()
	_, r, err := proto.Decode(s.Handle(proto.Encode(7, m)))
	if err != nil {
		t.Fatalf("reply to %s does not decode: %v", m.Type(), err)
	}
	return r
}

func ok(t *testing.T, s *Session, m proto.Msg) {
	t.Helper()
	if r := call(t, s, m); r.Type() != proto.TOK {
		t.Fatalf("%s: %+v", m.Type(), r)
	}
}

func fails(t *testing.T, s *Session, m proto.Msg, want string) *proto.Error {
	t.Helper()
	r := call(t, s, m)
	e, isErr := r.(*proto.Error)
	if !isErr || !strings.Contains(e.Message, want) {
		t.Fatalf("%s: reply %+v, want an error containing %q", m.Type(), r, want)
	}
	return e
}

// copySource is a WGSL copy kernel (the fake backend copies whatever the
// source; CheckKernel parses it).
const copySource = "@group(0) @binding(0) var<storage, read> a: array<f32>;\n" +
	"@group(0) @binding(1) var<storage, read_write> b: array<f32>;\n" +
	"@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {\n  // (((\n  b[id.x] = a[id.x];\n}\n"

func copyKernel(id uint32, n int) *proto.Compile {
	return &proto.Compile{Kernel: id, Node: 12, Op: "probe", Language: "wgsl", Entry: "main", Source: []byte(copySource),
		Workgroup: [3]uint32{64, 1, 1}, Grid: [3]uint32{1, 1, 1},
		Bindings: []proto.Binding{{Access: proto.AccessRead, Input: 0, Output: -1, DType: proto.F32, Shape: []uint32{uint32(n)}},
			{Access: proto.AccessWrite, Input: -1, Output: 0, DType: proto.F32, Shape: []uint32{uint32(n)}}}}
}

func TestSessionRunsAndFrees(t *testing.T) {
	be := newFake()
	c := New(be, Options{})
	s := c.NewSession()
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	// A chunked upload.
	ok(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{2}, Offset: 0, Data: data[:3]})
	fails(t, s, &proto.Download{Buf: 1, Length: 4}, "does not exist")
	fails(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{2}, Offset: 5, Data: data[5:]}, "expected 3")
	ok(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{2}, Offset: 0, Data: data[:3]})
	ok(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{2}, Offset: 3, Data: data[3:]})
	ok(t, s, copyKernel(1, 2))
	fails(t, s, copyKernel(1, 2), "already in use")
	bad := copyKernel(2, 2)
	bad.Source = []byte(copySource + "// syntax error\n") // valid WGSL that the fake's compiler refuses
	if e := fails(t, s, bad, "3:7: syntax error"); e.Node != 12 {
		t.Errorf("compile error names node %d, want 12", e.Node)
	}
	ok(t, s, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: 1, Node: 12, In: []uint32{1}, Out: []uint32{2}}}})
	if d := call(t, s, &proto.Download{Buf: 2, Offset: 2, Length: 4}).(*proto.Data); string(d.Data) != string(data[2:6]) {
		t.Errorf("download %v, want %v", d.Data, data[2:6])
	}
	fails(t, s, &proto.Download{Buf: 2, Offset: 6, Length: 4}, "holds 8")
	// A failed launch names its command and node; the frees after it run.
	e := fails(t, s, &proto.Batch{Cmds: []proto.Cmd{
		{Kind: proto.CmdLaunch, Kernel: 1, Node: 12, In: []uint32{1}, Out: []uint32{3}},
		{Kind: proto.CmdLaunch, Kernel: 9, Node: 13, In: []uint32{1}, Out: []uint32{4}},
		{Kind: proto.CmdLaunch, Kernel: 1, Node: 14, In: []uint32{1}, Out: []uint32{5}},
		{Kind: proto.CmdFree, Buf: 3},
		{Kind: proto.CmdFree, Buf: 99}, // unknown: no error
	}}, "kernel 9 was not compiled")
	if e.Index != 1 || e.Node != 13 {
		t.Errorf("error at command %d node %d, want 1 and 13", e.Index, e.Node)
	}
	if _, made := s.bufs[5]; made {
		t.Error("a launch after the failed one ran")
	}
	fails(t, s, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: 1, In: []uint32{1}, Out: []uint32{1}}}}, "already in use")
	fails(t, s, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: 1, In: []uint32{1}}}}, "0 output ids")
	ok(t, s, &proto.Sync{})
	ok(t, s, &proto.Reset{})
	if s.Buffers() != 0 || len(be.live) != 0 {
		t.Errorf("after reset: %d session buffers, %d backend buffers", s.Buffers(), len(be.live))
	}
	fails(t, s, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: 1, In: []uint32{1}, Out: []uint32{2}}}}, "not compiled")
}

func TestWeightCache(t *testing.T) {
	be := newFake()
	c := New(be, Options{CacheBytes: 16})
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	key := proto.WeightKey(proto.F32, []uint32{2}, data)
	s := c.NewSession()
	q := call(t, s, &proto.Query{Items: []proto.QueryItem{{Buf: 1, Hash: key}}}).(*proto.QueryOK)
	if q.Found[0] {
		t.Fatal("an empty cache found a weight")
	}
	fails(t, s, &proto.Upload{Buf: 1, Cache: true, Hash: [32]byte{1}, DType: proto.F32, Shape: []uint32{2}, Data: data}, "content hash")
	ok(t, s, &proto.Upload{Buf: 1, Cache: true, Hash: key, DType: proto.F32, Shape: []uint32{2}, Data: data})
	// Kernels may not write a cached weight.
	rw := copyKernel(1, 2)
	rw.Bindings = []proto.Binding{{Access: proto.AccessReadWrite, Input: 0, Output: 0, DType: proto.F32, Shape: []uint32{2}}}
	ok(t, s, rw)
	fails(t, s, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: 1, In: []uint32{1}, Out: []uint32{1}}}}, "read-only")
	s.Close()
	// Another session finds it without uploading.
	s2 := c.NewSession()
	q = call(t, s2, &proto.Query{Items: []proto.QueryItem{{Buf: 5, Hash: key}, {Buf: 6, Hash: [32]byte{}}}}).(*proto.QueryOK)
	if !q.Found[0] || q.Found[1] {
		t.Fatalf("found %v, want [true false]", q.Found)
	}
	if d := call(t, s2, &proto.Download{Buf: 5, Length: 8}).(*proto.Data); string(d.Data) != string(data) {
		t.Errorf("cached weight reads %v", d.Data)
	}
	// Over budget, unused weights are evicted; used ones stay.
	other := []byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	k2 := proto.WeightKey(proto.F32, []uint32{4}, other)
	ok(t, s2, &proto.Upload{Buf: 7, Cache: true, Hash: k2, DType: proto.F32, Shape: []uint32{4}, Data: other})
	if n, b := c.CachedWeights(); n != 2 || b != 24 {
		t.Errorf("cache holds %d weights, %d bytes; want both (in use)", n, b)
	}
	ok(t, s2, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdFree, Buf: 5}}})
	if n, b := c.CachedWeights(); n != 1 || b != 16 {
		t.Errorf("cache holds %d weights, %d bytes; want the 16-byte one", n, b)
	}
	s2.Close()
	if len(be.live) != 1 {
		t.Errorf("%d backend buffers live, want the cached weight", len(be.live))
	}
}

func TestLimits(t *testing.T) {
	c := New(newFake(), Options{MemoryBytes: 64, MaxBuffers: 2})
	s := c.NewSession()
	fails(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1 << 19}}, "max buffer size")
	fails(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{32}}, "memory budget of 64 bytes")
	ok(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1}, Data: make([]byte, 4)})
	ok(t, s, &proto.Upload{Buf: 2, DType: proto.F32, Shape: []uint32{1}, Data: make([]byte, 4)})
	fails(t, s, &proto.Upload{Buf: 3, DType: proto.F32, Shape: []uint32{1}, Data: make([]byte, 4)}, "limit")
	k := copyKernel(1, 1)
	k.Workgroup = [3]uint32{512, 1, 1}
	fails(t, s, k, "exceeds")
	k = copyKernel(1, 1)
	k.Language = "spirv"
	fails(t, s, k, "runs wgsl")
	k = copyKernel(1, 1)
	k.Bindings[1].Output = 1
	fails(t, s, k, "numbered")
	fails(t, s, &proto.Hello{}, "unexpected hello")
	r := s.Handle([]byte("garbage!"))
	if _, m, err := proto.Decode(r); err != nil || m.(*proto.Error).Code != proto.CodeMalformed {
		t.Errorf("garbage: reply %v %v", m, err)
	}
}

func TestAuthorized(t *testing.T) {
	if !Authorized("abc", "abc") || Authorized("abc", "abd") || Authorized("abc", "") || Authorized("abc", "abcd") {
		t.Error("Authorized compares wrongly")
	}
}

// FuzzSession: any sequence of frames gets one decodable reply each, and
// the session never panics (the fake backend panics on a double free).
func FuzzSession(f *testing.F) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	key := proto.WeightKey(proto.F32, []uint32{2}, data)
	seq := [][]byte{
		proto.Encode(1, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{2}, Data: data}),
		proto.Encode(2, copyKernel(1, 2)),
		proto.Encode(3, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: 1, In: []uint32{1}, Out: []uint32{2}}, {Kind: proto.CmdFree, Buf: 1}}}),
		proto.Encode(4, &proto.Upload{Buf: 3, Cache: true, Hash: key, DType: proto.F32, Shape: []uint32{2}, Data: data}),
		proto.Encode(5, &proto.Query{Items: []proto.QueryItem{{Buf: 4, Hash: key}}}),
		proto.Encode(6, &proto.Download{Buf: 2, Length: 8}),
		proto.Encode(7, &proto.Reset{}),
	}
	var all []byte
	for _, fr := range seq {
		f.Add(fr)
		all = append(all, byte(len(fr)))
		all = append(all, fr...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, in []byte) {
		s := New(newFake(), Options{MemoryBytes: 1 << 16}).NewSession()
		// in is a sequence of frames, each preceded by its length byte;
		// the prelude sets up buffers and a kernel to hit deeper paths.
		for _, fr := range seq[:3] {
			s.Handle(fr)
		}
		for len(in) > 0 {
			n := min(int(in[0]), len(in)-1)
			fr := in[1 : 1+n]
			in = in[1+n:]
			if _, _, err := proto.Decode(s.Handle(fr)); err != nil {
				t.Fatalf("reply does not decode: %v", err)
			}
		}
		s.Close()
	})
}

// gated is a fake backend safe for concurrent sessions whose first Upload
// waits for a signal, so that two sessions upload the same weight at once.
type gated struct {
	mu      sync.Mutex
	f       *fake
	entered chan struct{}
	release chan struct{}
	first   bool
}

func (g *gated) Info() proto.DeviceInfo { return g.f.Info() }
func (g *gated) Upload(dt ir.DType, shape []int, data []byte) (Buffer, error) {
	g.mu.Lock()
	wait := !g.first
	g.first = true
	g.mu.Unlock()
	if wait {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.f.Upload(dt, shape, data)
}
func (g *gated) Compile(k *codegen.Kernel) error { return g.f.Compile(k) }
func (g *gated) Launch(n *ir.Node, k *codegen.Kernel, in []Buffer) ([]Buffer, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.f.Launch(n, k, in)
}
func (g *gated) Download(b Buffer, off, n int64) ([]byte, error) { return g.f.Download(b, off, n) }
func (g *gated) Sync() error                                     { return nil }
func (g *gated) Free(b Buffer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.f.Free(b)
}

// Two sessions that upload the same weight at the same time share one
// cache entry: the second upload to finish must not replace the first
// one's entry (whose buffer would then never be freed, and whose bytes
// would stay counted).
func TestWeightCacheConcurrentUploads(t *testing.T) {
	be := &gated{f: newFake(), entered: make(chan struct{}), release: make(chan struct{})}
	c := New(be, Options{CacheBytes: 1})
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	key := proto.WeightKey(proto.F32, []uint32{2}, data)
	up := &proto.Upload{Buf: 1, Cache: true, Hash: key, DType: proto.F32, Shape: []uint32{2}, Data: data}
	s1, s2 := c.NewSession(), c.NewSession()
	done := make(chan proto.Msg)
	go func() {
		_, r, _ := proto.Decode(s1.Handle(proto.Encode(1, up)))
		done <- r
	}()
	<-be.entered // s1 is inside the backend's Upload
	ok(t, s2, up)
	close(be.release)
	if r := <-done; r.Type() != proto.TOK {
		t.Fatalf("first session's upload: %+v", r)
	}
	if n, b := c.CachedWeights(); n != 1 || b != 8 {
		t.Errorf("cache holds %d weights, %d bytes; want one of 8 bytes", n, b)
	}
	s1.Close()
	s2.Close()
	// Over budget and unused: evicted, every backend buffer freed.
	if n, b := c.CachedWeights(); n != 0 || b != 0 {
		t.Errorf("after both sessions closed, the cache holds %d weights, %d bytes; want none", n, b)
	}
	if len(be.f.live) != 0 {
		t.Errorf("%d backend buffers live after eviction, want 0", len(be.f.live))
	}
}

// Kernels that would crash wgpu or naga are refused before the backend
// sees them, by tapml's own WGSL front end; f16 and subgroups only reach a
// device that lists their features.
func TestCheckKernel(t *testing.T) {
	good := copySource
	body := strings.Index(good, "b[id.x]")
	with := func(at string) string { return good[:body] + at + good[body:] }
	for _, tc := range []struct {
		name, src, entry, want string
		features               []string // the device's
	}{
		{"good", good, "main", "", nil},
		{"invalid UTF-8 source", with("// \xff\xfe\n"), "main", "invalid UTF-8", nil},
		{"invalid UTF-8 entry", good, "ma\xffin", "is not a WGSL identifier", nil},
		{"entry not declared", good, "mainx", "entry point", nil},
		{"entry is a keyword", good, "fn main", "is not a WGSL identifier", nil},
		{"empty entry", good, "", "is not a WGSL identifier", nil},
		{"NUL byte", good + "\x00 junk", "main", "unexpected character", nil},
		{"escape", with("\x1b[2J"), "main", "unexpected character", nil},
		{"4000 parentheses", with("let x = " + strings.Repeat("(", 4000) + "1" + strings.Repeat(")", 4000) + ";\n"), "main", "nesting deeper than", nil},
		{"unbalanced", good + "}", "main", "want a declaration", nil},
		{"block comment", with("/* }"), "main", "block comments", nil},
		{"f16 without shader-f16", "enable f16;\n" + good, "main", "has no shader-f16", nil},
		{"f16 with shader-f16", "enable f16;\n" + good, "main", "", []string{proto.FeatureShaderF16}},
		{"subgroups without the feature", "enable subgroups;\n" + good, "main", "has no subgroups", []string{proto.FeatureShaderF16}},
		{"subgroups with the feature", "enable subgroups;\n" + good, "main", "", []string{proto.FeatureSubgroups}},
		{"subgroup matrices", "enable f16;\nenable chromium_experimental_subgroup_matrix;\n" + good, "main", "remote devices do not offer", []string{proto.FeatureShaderF16, proto.FeatureSubgroups}},
		{"empty", "", "main", "kernel source of 0 bytes", nil},
		{"huge", strings.Repeat(" ", proto.MaxSource+1), "main", "want 1 to", nil},
	} {
		err := CheckKernel([]byte(tc.src), tc.entry, proto.DeviceInfo{Features: tc.features})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Memory is budgeted over the whole core and follows the bytes received:
// an upload that declares 1 MiB and sends 4 bytes holds 4.
func TestMemoryBudget(t *testing.T) {
	c := New(newFake(), Options{MemoryBytes: 64})
	s := c.NewSession()
	fails(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1 << 18}, Data: make([]byte, 4)}, "memory budget of 64 bytes")
	c = New(newFake(), Options{MemoryBytes: 1 << 20})
	s = c.NewSession()
	ok(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1 << 18}, Data: make([]byte, 4)})
	if u := c.Used(); u != 4 {
		t.Errorf("a 1 MiB upload with 4 bytes received counts %d bytes", u)
	}
	if up := s.bufs[1].up; cap(up.data) > 8 {
		t.Errorf("the upload holds %d bytes of capacity for 4 received", cap(up.data))
	}
	// A second session shares the budget.
	s2 := c.NewSession()
	fails(t, s2, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1 << 18}, Data: make([]byte, 1<<20)}, "memory budget")
	ok(t, s2, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1<<18 - 1}, Data: make([]byte, 1<<20-4)})
	s.Close()
	s2.Close()
	if u := c.Used(); u != 0 {
		t.Errorf("after both sessions closed, %d bytes counted", u)
	}
}

// pooling is a fake backend with a buffer pool.
type pooling struct {
	*fake
	released int
}

func (p *pooling) ReleasePool() { p.released++ }

// Ending a session (Close, or a Reset from the relay between hosts)
// releases the backend's pool, so the next session gets new buffers.
func TestCloseReleasesPool(t *testing.T) {
	be := &pooling{fake: newFake()}
	s := New(be, Options{}).NewSession()
	ok(t, s, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{1}, Data: make([]byte, 4)})
	ok(t, s, &proto.Reset{})
	s.Close()
	if be.released != 2 || len(be.live) != 0 {
		t.Errorf("pool released %d times, %d buffers live; want 2 and 0", be.released, len(be.live))
	}
}
