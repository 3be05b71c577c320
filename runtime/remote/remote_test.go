package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/spirv"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/internal/testenv/webgputest"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/llm"
	"github.com/tapml/tapml/runtime/remote/device"
	"github.com/tapml/tapml/runtime/remote/proto"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/runtime/webgpu"
	"github.com/tapml/tapml/tensor"
)

// The tests serve the local WebGPU device (lavapipe on the project's
// machines; without one they fail, see internal/testenv) from worker
// processes: the test binary itself, which TestMain turns into a worker
// when it runs with WorkerEnv set.

// failNodeEnv makes a test worker's launches of one node id fail.
const failNodeEnv = "TAPML_TEST_FAIL_NODE"

// vulkanEnv (set to "1") makes a test worker serve tapml's own Vulkan
// device (device.Vulkan), as `tapmlc serve --vulkan` does.
const vulkanEnv = "TAPML_TEST_VULKAN_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) == "1" {
		o := NativeWorkerOptions{Vulkan: os.Getenv(vulkanEnv) == "1"}
		if id, err := strconv.Atoi(os.Getenv(failNodeEnv)); err == nil {
			o.Wrap = func(be device.Backend) device.Backend { return failing{be, id} }
		}
		if err := RunNativeWorker(o); err != nil {
			fmt.Fprintln(os.Stderr, "test worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func localGPU(t *testing.T) *webgpu.Device { return webgputest.Device(t) }

// testWorkers starts a pool of this test binary as workers, with env added
// to their environment.
func testWorkers(t *testing.T, max int, env ...string) *Workers {
	t.Helper()
	w, err := StartWorkers(WorkerOptions{MaxSessions: max, Log: t.Logf, Command: func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// waitIdle waits until every worker of the pool is idle (a session ends
// on the server shortly after the host closes).
func waitIdle(t *testing.T, w *Workers) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		idle := len(w.idle) == w.live
		w.mu.Unlock()
		if idle {
			return
		}
	}
	t.Fatal("the workers did not become idle")
}

// localCore is a device core over the local GPU, for the in-process page
// of the relay tests.
func localCore(t *testing.T) *device.Core {
	return device.New(device.Native(localGPU(t)), device.Options{})
}

// tracker records a listener's connections, so that a test can cut them
// (httptest forgets hijacked connections).
type tracker struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *tracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *tracker) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

func serve(t *testing.T, o ServerOptions) (*tracker, string) {
	t.Helper()
	if o.Workers == nil && !o.Relay {
		o.Workers = testWorkers(t, 2)
	}
	srv := httptest.NewUnstartedServer(NewServer(o))
	tr := &tracker{Listener: srv.Listener}
	srv.Listener = tr
	srv.Start()
	t.Cleanup(srv.Close)
	return tr, "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dial(t *testing.T, url string, o Options) *Device {
	t.Helper()
	d, err := DialOptions(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func tinyModel(t *testing.T) *ir.Module {
	t.Helper()
	m, err := arch.Build("tiny", llama.Tiny, llama.RandomWeights(llama.Tiny, 7))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// forward runs a prompt and a few decode steps and returns every logit.
func forward(t *testing.T, m *ir.Module, dev runtime.Device) [][]float32 {
	t.Helper()
	exec := runtime.NewExecutor(m, dev)
	defer exec.Close()
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all [][]float32
	l, err := s.Forward([]int{1, 40, 41, 42, 43})
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, l)
	for i := 0; i < 6; i++ {
		if l, err = s.Forward([]int{50 + i}); err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	return all
}

// A model on the remote device computes what it computes on the local
// device (the same kernels on the same GPU: bit for bit), and weights
// cross the connection once.
func TestRemoteMatchesLocal(t *testing.T) {
	m := tinyModel(t)
	want := forward(t, m, localGPU(t))
	workers := testWorkers(t, 2)
	_, url := serve(t, ServerOptions{Workers: workers})
	d := dial(t, url, Options{MaxBatch: 7, Window: 3}) // small batches and window: exercise the pipelining
	got := forward(t, m, d)
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("step %d logit %d: remote %v, local %v", i, j, got[i][j], want[i][j])
			}
		}
	}
	st := d.Stats()
	if st.WeightsSent == 0 || st.Launches == 0 || st.Compiles == 0 {
		t.Fatalf("stats %+v", st)
	}
	// A second run on the same connection sends no weight.
	forward(t, m, d)
	if st2 := d.Stats(); st2.WeightsSent != st.WeightsSent || st2.WeightsCached < st.WeightsSent {
		t.Errorf("second run: stats %+v after %+v; want every weight found in the cache", st2, st)
	}
	// Nor does a new connection once this one ended: it gets the same
	// worker, whose weight cache outlives sessions.
	d.Close()
	waitIdle(t, workers)
	d2 := dial(t, url, Options{})
	forward(t, m, d2)
	if st := d2.Stats(); st.WeightsSent != 0 || st.WeightsCached == 0 {
		t.Errorf("new connection: stats %+v; want every weight found in the cache", st)
	}
	if !strings.HasPrefix(d.Name(), "remote(ws://127.0.0.1:") || !strings.Contains(d.Name(), localGPU(t).Name()) {
		t.Errorf("name %q", d.Name())
	}
	if d.Limits() != localGPU(t).Limits() {
		t.Errorf("limits %+v, the device's are %+v", d.Limits(), localGPU(t).Limits())
	}
}

func TestToken(t *testing.T) {
	_, url := serve(t, ServerOptions{Token: "s3cret"})
	for _, tc := range []struct{ url, token, want string }{
		{url, "", "requires a token"},
		{url, "wrong", "wrong token"},
		{url + "?token=wrong", "", "wrong token"},
	} {
		_, err := DialOptions(context.Background(), tc.url, Options{Token: tc.token})
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token %q at %s: %v, want a refusal saying %q", tc.token, tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "wrong?") {
			t.Errorf("the message shows the token: %v", err)
		}
	}
	d := dial(t, url+"?token=s3cret&timeout=5s", Options{})
	if d.opts.Timeout != 5*time.Second || strings.Contains(d.Name(), "s3cret") {
		t.Errorf("options from the URL: timeout %s, name %q", d.opts.Timeout, d.Name())
	}
	if _, err := Dial(url, "s3cret"); err != nil {
		t.Error(err)
	}
}

// When the server goes away mid-run, the host gets a clear error at once.
func TestConnectionLost(t *testing.T) {
	srv, url := serve(t, ServerOptions{})
	d := dial(t, url, Options{Timeout: time.Minute})
	m := tinyModel(t)
	exec := runtime.NewExecutor(m, d)
	defer exec.Close()
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward([]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	srv.cut()
	start := time.Now()
	for err == nil && s.Pos < 200 {
		_, err = s.Forward([]int{4})
	}
	if err == nil || !strings.Contains(err.Error(), "remote device "+url+": connection lost during ") {
		t.Fatalf("error %v, want a lost connection", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the error took %s", time.Since(start))
	}
	t.Log(err)
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Errorf("sync after loss: %v", err)
	}
}

// A device that stops answering is given up after the timeout.
func TestTimeout(t *testing.T) {
	info := testWorkers(t, 1).Info()
	mute := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		_, b, err := c.Read(r.Context())
		if err != nil {
			return
		}
		c.Write(r.Context(), websocket.MessageBinary, proto.Encode(proto.PeekID(b), &proto.HelloOK{Version: proto.Version, Info: info}))
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mute)
	defer srv.Close()
	d := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"), Options{Timeout: 300 * time.Millisecond})
	start := time.Now()
	err := d.Sync()
	if err == nil || !strings.Contains(err.Error(), "no reply within 300ms to sync") {
		t.Fatalf("sync: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("gave up after %s", el)
	}
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "no reply") {
		t.Errorf("a second call: %v", err)
	}
}

// Malformed and oversized frames get error replies; the connection stays
// usable.
func TestBadFrames(t *testing.T) {
	_, url := serve(t, ServerOptions{})
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(proto.MaxFrame)
	roundTrip := func(frame []byte) proto.Msg {
		t.Helper()
		if err := c.Write(ctx, websocket.MessageBinary, frame); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, m, err := proto.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := roundTrip(proto.Encode(1, &proto.Hello{Version: proto.Version})); m.Type() != proto.THelloOK {
		t.Fatalf("hello: %v", m)
	}
	big := make([]byte, proto.MaxFrame+100)
	copy(big, proto.Encode(2, &proto.Sync{}))
	for _, tc := range []struct {
		frame []byte
		code  proto.Code
		want  string
	}{
		{[]byte("nonsense"), proto.CodeMalformed, "magic"},
		{[]byte{}, proto.CodeMalformed, "an empty frame"}, // to a worker, the end of a session
		{big, proto.CodeTooLarge, "exceeds"},
		{proto.Encode(3, &proto.Hello{}), proto.CodeMalformed, "unexpected hello"},
		{proto.Encode(4, &proto.Compile{Kernel: 1, Node: 5, Op: "add", Language: "wgsl", Entry: "main", Source: []byte("fn main() { let x = ; }"),
			Workgroup: [3]uint32{1, 1, 1}}), proto.CodeFailed, "compile"},
		{proto.Encode(5, &proto.Download{Buf: 77, Length: 4}), proto.CodeFailed, "does not exist"},
		// Kernels that would crash wgpu are refused by the check; the
		// worker lives on.
		{proto.Encode(6, &proto.Compile{Kernel: 2, Node: 5, Op: "add", Language: "wgsl", Entry: "main", Source: []byte("fn main() {} \xff"),
			Workgroup: [3]uint32{1, 1, 1}}), proto.CodeFailed, "invalid UTF-8"},
		{proto.Encode(7, &proto.Compile{Kernel: 3, Node: 5, Op: "add", Language: "wgsl", Entry: "main",
			Source:    []byte("fn main() { let x = " + strings.Repeat("(", 4000) + "1" + strings.Repeat(")", 4000) + "; }"),
			Workgroup: [3]uint32{1, 1, 1}}), proto.CodeFailed, "nesting deeper than"},
	} {
		m := roundTrip(tc.frame)
		e, ok := m.(*proto.Error)
		if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.want) {
			t.Errorf("frame %.12q: reply %+v, want code %d with %q", tc.frame, m, tc.code, tc.want)
		}
	}
	if m := roundTrip(proto.Encode(6, &proto.Sync{})); m.Type() != proto.TOK {
		t.Errorf("sync after bad frames: %+v", m)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, addr, token, err string }{
		{"ws://127.0.0.1:9000", "ws://127.0.0.1:9000", "", ""},
		{"ws://h:1/x?token=abc&timeout=2m&keep=1", "ws://h:1/x?keep=1", "abc", ""},
		{"http://h:1", "", "", "ws:// or wss://"},
		{"ws://", "", "", "no host"},
		{"ws://h:1?timeout=soon&token=abc", "", "", "timeout"},
	} {
		addr, o, err := ParseURL(tc.in, Options{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "abc") {
				t.Errorf("%s: error %v, want %q (and no token)", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || addr != tc.addr || o.Token != tc.token {
			t.Errorf("%s: %q %q %v, want %q %q", tc.in, addr, o.Token, err, tc.addr, tc.token)
		}
	}
}

// failing is a backend whose launches of one node fail.
type failing struct {
	device.Backend
	node int
}

func (f failing) Launch(n *ir.Node, k *codegen.Kernel, in []device.Buffer) ([]device.Buffer, error) {
	if n.ID == f.node {
		return nil, errors.New("injected launch failure")
	}
	return f.Backend.Launch(n, k, in)
}

// A launch that fails on the device is reported (by a later call: launches
// are pipelined) as a KernelError naming the node, and the device stays
// usable.
func TestLaunchFailureNamesNode(t *testing.T) {
	m := tinyModel(t)
	var bad *ir.Node
	for _, n := range m.Func("prefill").Nodes {
		if n.Op == ir.OpMatmul {
			bad = n
			break
		}
	}
	_, url := serve(t, ServerOptions{Workers: testWorkers(t, 1, fmt.Sprintf("%s=%d", failNodeEnv, bad.ID))})
	d := dial(t, url, Options{})
	exec := runtime.NewExecutor(m, d)
	defer exec.Close()
	s, err := llm.NewSession(exec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Forward([]int{1, 2, 3})
	var ke *runtime.KernelError
	if !errors.As(err, &ke) || ke.Node != bad || !strings.Contains(err.Error(), "injected launch failure") {
		t.Fatalf("error %v, want a KernelError of node %s", err, bad)
	}
	t.Log(err)
	// The failure is reported once; the device still works.
	if err := d.Sync(); err != nil {
		t.Errorf("sync after the failure: %v", err)
	}
	b, err := d.Upload(tensor.FromFloat32([]int{2}, []float32{1, 2}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.Download(b); err != nil || got.Float32s()[1] != 2 {
		t.Errorf("download after the failure: %v %v", got, err)
	}
}

// page is an in-process stand-in for the browser page: it attaches to a
// relaying server and serves sessions with the device core over the local
// GPU, as the page's wasm program does.
func page(t *testing.T, url, token string, c *device.Core) (attached error, stop func()) {
	t.Helper()
	ctx := context.Background()
	conn, _, err := websocket.Dial(ctx, url+"/attach", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(proto.MaxFrame)
	if err := conn.Write(ctx, websocket.MessageBinary, proto.Encode(1, &proto.Attach{Version: proto.Version, Token: token, Info: c.Info()})); err != nil {
		t.Fatal(err)
	}
	_, b, err := conn.Read(ctx)
	if err != nil {
		return err, func() {}
	}
	if _, m, err := proto.Decode(b); err != nil {
		t.Fatal(err)
	} else if e, ok := m.(*proto.Error); ok {
		return e, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := c.NewSession()
		defer s.Close()
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if conn.Write(ctx, websocket.MessageBinary, s.Handle(b)) != nil {
				return
			}
		}
	}()
	return nil, func() { conn.CloseNow(); <-done }
}

// The relay passes host sessions to the attached page, one at a time,
// resetting the page between them; the page's weight cache outlives them.
func TestRelay(t *testing.T) {
	_, url := serve(t, ServerOptions{Relay: true, Token: "tk", AttachWait: 300 * time.Millisecond})
	if _, err := DialOptions(context.Background(), url, Options{Token: "tk"}); err == nil || !strings.Contains(err.Error(), "no browser page is attached") {
		t.Fatalf("dial without a page: %v", err)
	}
	if err, _ := page(t, url, "nope", localCore(t)); err == nil || !strings.Contains(err.Error(), "wrong token") {
		t.Fatalf("a page with a wrong token: %v", err)
	}
	pc := device.New(device.Native(localGPU(t)), device.Options{})
	err, stop := page(t, url, "tk", pc)
	if err != nil {
		t.Fatal(err)
	}
	m := tinyModel(t)
	want := forward(t, m, localGPU(t))
	d := dial(t, url, Options{Token: "tk"})
	if d.Info().Name != pc.Info().Name {
		t.Errorf("handshake describes %q, the page is %q", d.Info().Name, pc.Info().Name)
	}
	// A second host waits for the page, then gives up.
	if _, err := DialOptions(context.Background(), url, Options{Token: "tk"}); err == nil || !strings.Contains(err.Error(), "serves another host") {
		t.Errorf("a second host: %v", err)
	}
	got := forward(t, m, d)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Error("the relayed run differs from the local one")
	}
	d.Close()
	d2 := dial(t, url, Options{Token: "tk"})
	forward(t, m, d2)
	if st := d2.Stats(); st.WeightsSent != 0 {
		t.Errorf("the second session sent %d weights; the page had them cached", st.WeightsSent)
	}
	// The page goes away: the host's next call fails at once.
	stop()
	start := time.Now()
	err = d2.Sync()
	if err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Errorf("sync after the page left: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	t.Log(err)
}

// A page that cannot start (no WebGPU adapter) posts its reason; a host
// then fails at once with it instead of waiting for a page, and a page
// that attaches later clears it. Posts from other origins, without the
// token, or not POST are refused.
func TestRelayPageError(t *testing.T) {
	_, url := serve(t, ServerOptions{Relay: true, Token: "tk", AttachWait: time.Minute})
	base := "http" + strings.TrimPrefix(url, "ws")
	post := func(path, origin, body string) int {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, origin string
		want         int
	}{
		{"/page-error?token=no", "", http.StatusForbidden},
		{"/page-error?token=tk", "http://evil.example", http.StatusForbidden},
		{"/page-error?token=tk", base, http.StatusNoContent},
	} {
		if got := post(tc.path, tc.origin, "no WebGPU adapter: start Chromium with --enable-unsafe-webgpu"); got != tc.want {
			t.Errorf("POST %s from %q: %d, want %d", tc.path, tc.origin, got, tc.want)
		}
	}
	start := time.Now()
	_, err := DialOptions(context.Background(), url, Options{Token: "tk"})
	if err == nil || !strings.Contains(err.Error(), "could not start: no WebGPU adapter: start Chromium with --enable-unsafe-webgpu") {
		t.Fatalf("dial after the page failed: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the host waited %s", time.Since(start))
	}
	err, stop := page(t, url, "tk", localCore(t))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dial(t, url, Options{Token: "tk"}) // the attached page serves
}

// A Vulkan server (device.Vulkan) offers shader-f16 where its device has
// f16 (lavapipe has): a host asking for f16 compute runs at it, storing
// f32 tensors as f16 (rounded on upload, widened on download, half the
// bytes on the wire) and computing what the vulkan target computes at f16
// on the same device, bit for bit (the same WGSL, translated to the same
// SPIR-V, under the same limits); a host asking for f32 computes what the
// vulkan target computes at f32.
func TestRemoteVulkanF16(t *testing.T) {
	f16 := runtime.Precision{Compute: ir.F16, Accumulate: ir.F32}
	_, url := serve(t, ServerOptions{Workers: testWorkers(t, 2, vulkanEnv+"=1")})
	m := tinyModel(t)
	for _, p := range []runtime.Precision{f16, runtime.F32} {
		local, err := vulkan.Open(vulkan.Options{Generate: spirv.Generate, Compute: p.Compute, PipelineCacheDir: "-"})
		if err != nil {
			t.Fatal(err)
		}
		want := forward(t, m, local)
		local.Close()
		d := dial(t, url, Options{Precision: p})
		if !d.ShaderF16() || d.Precision() != p {
			t.Fatalf("asked for %s: the device has shader-f16 %v and runs at %s", p, d.ShaderF16(), d.Precision())
		}
		got := forward(t, m, d)
		d.Close() // the server serves two sessions at a time
		for i := range want {
			for j := range want[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("%s: step %d logit %d: remote %v, the vulkan target %v", p, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
	// The data path: 2 bytes a value on the wire, f16's rounding back.
	d := dial(t, url, Options{Precision: f16})
	in := []float32{1, 1 + 0x1p-12, 70000, -3.14159}
	before := d.Stats().BytesSent
	b, err := d.Upload(tensor.FromFloat32([]int{len(in)}, in))
	if err != nil {
		t.Fatal(err)
	}
	if sent := d.Stats().BytesSent - before; sent != 2*int64(len(in)) {
		t.Errorf("%d f32 values stored as f16 sent %d bytes, want %d", len(in), sent, 2*len(in))
	}
	back, err := d.Download(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 1, float32(math.Inf(1)), -3.140625}
	if got := back.Float32s(); !slices.Equal(got, want) || back.DType != ir.F32 {
		t.Errorf("f32 through remote f16 storage: %s %v, want f32 %v", back.DType, got, want)
	}
}

// A WebGPU server lists no shader-f16: a host asking for f16 runs at f32.
func TestRemoteWebGPUNoF16(t *testing.T) {
	_, url := serve(t, ServerOptions{})
	d := dial(t, url, Options{Precision: runtime.Precision{Compute: ir.F16}})
	if d.ShaderF16() || d.Precision() != runtime.F32 {
		t.Errorf("a WebGPU server: shader-f16 %v, precision %s; want none and f32", d.ShaderF16(), d.Precision())
	}
}
