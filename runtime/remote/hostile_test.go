package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/remote/proto"
)

// rawHost is a host that speaks frames directly, as an attacker would.
type rawHost struct {
	t *testing.T
	c *websocket.Conn
}

func rawDial(t *testing.T, url string) *rawHost {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(proto.MaxFrame)
	t.Cleanup(func() { c.CloseNow() })
	return &rawHost{t, c}
}

// send writes a frame and returns the reply, or the error that ended the
// connection.
func (h *rawHost) send(frame []byte) (proto.Msg, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.c.Write(ctx, websocket.MessageBinary, frame); err != nil {
		return nil, err
	}
	_, b, err := h.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	_, m, err := proto.Decode(b)
	if err != nil {
		h.t.Fatalf("the reply does not decode: %v", err)
	}
	return m, nil
}

// must sends a frame and fails the test unless the reply has type want.
func (h *rawHost) must(frame []byte, want proto.Type) proto.Msg {
	h.t.Helper()
	m, err := h.send(frame)
	if err != nil {
		h.t.Fatalf("%s: %v", frame[2:3], err)
	}
	if m.Type() != want {
		h.t.Fatalf("reply %+v, want %s", m, want)
	}
	return m
}

func httptestServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func hello(h *rawHost) {
	h.must(proto.Encode(1, &proto.Hello{Version: proto.Version, Client: "attacker"}), proto.THelloOK)
}

func floats(n int, v float32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// kernel is a compile request of one 512-float input and one 512-float
// output running body.
func kernel(id uint32, body string) *proto.Compile {
	src := "@group(0) @binding(0) var<storage, read> a: array<f32>;\n" +
		"@group(0) @binding(1) var<storage, read_write> b: array<f32>;\n" +
		"@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {\n" + body + "\n}\n"
	return &proto.Compile{Kernel: id, Node: 40 + id, Op: "probe", Language: "wgsl", Entry: "main", Source: []byte(src),
		Workgroup: [3]uint32{64, 1, 1}, Grid: [3]uint32{8, 1, 1},
		Bindings: []proto.Binding{{Access: proto.AccessRead, Input: 0, Output: -1, DType: proto.F32, Shape: []uint32{512}},
			{Access: proto.AccessWrite, Input: -1, Output: 0, DType: proto.F32, Shape: []uint32{512}}}}
}

func launch(k, in, out uint32) *proto.Batch {
	return &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdLaunch, Kernel: k, Node: 40 + k, In: []uint32{in}, Out: []uint32{out}}}}
}

// A kernel that crashes the driver (here wgpu's abort on invalid UTF-8,
// with the kernel check turned off in the workers) costs the session that
// sent it: its host gets an error naming the request and matching
// runtime.ErrDeviceLost; another session in progress goes on; the server
// starts a new worker, and the next host runs a model as before.
func TestWorkerCrashCostsOneSession(t *testing.T) {
	_, url := serve(t, ServerOptions{Workers: testWorkers(t, 2, UncheckedKernelsEnv+"=1")})
	bystander := rawDial(t, url)
	hello(bystander)
	bystander.must(proto.Encode(2, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{512}, Data: floats(512, 3)}), proto.TOK)

	for _, crash := range []struct{ name, src string }{
		{"invalid UTF-8", "fn main() { let x = 1; } // \xff\xfe"},
		{"4000 parentheses", "fn main() { let x = " + strings.Repeat("(", 4000) + "1" + strings.Repeat(")", 4000) + "; }"},
	} {
		attacker := rawDial(t, url)
		hello(attacker)
		k := &proto.Compile{Kernel: 1, Node: 77, Op: "probe", Language: "wgsl", Entry: "main", Source: []byte(crash.src), Workgroup: [3]uint32{1, 1, 1}}
		m, err := attacker.send(proto.Encode(9, k))
		if err != nil {
			t.Fatalf("%s: the connection ended without a reply: %v", crash.name, err)
		}
		e, ok := m.(*proto.Error)
		if !ok || e.Code != proto.CodeLost || !strings.Contains(e.Message, "the device worker process died") ||
			!strings.Contains(e.Message, "compile request 9 (kernel 1 of node #77, probe)") {
			t.Fatalf("%s: reply %+v, want CodeLost naming the compile request", crash.name, m)
		}
		t.Logf("%s: %s", crash.name, e.Message)
		if _, err := attacker.send(proto.Encode(10, &proto.Sync{})); err == nil {
			t.Errorf("%s: the crashed session still answers", crash.name)
		}
		// The other session kept its worker and its buffer.
		d := bystander.must(proto.Encode(3, &proto.Download{Buf: 1, Length: 2048}), proto.TData).(*proto.Data)
		if string(d.Data) != string(floats(512, 3)) {
			t.Fatalf("%s: the bystander's buffer changed", crash.name)
		}
	}
	// A host through the client sees the loss as ErrDeviceLost, naming
	// the request.
	dev := dial(t, url, Options{})
	dev.mu.Lock()
	_, err := dev.request(&proto.Compile{Kernel: 99, Node: 5, Op: "probe", Language: "wgsl", Entry: "main",
		Source: []byte("fn main() {} \xff"), Workgroup: [3]uint32{1, 1, 1}}, "compile of node #5 probe")
	dev.mu.Unlock()
	if !errors.Is(err, runtime.ErrDeviceLost) || !strings.Contains(err.Error(), "compile of node #5 probe failed: the device worker process died") {
		t.Fatalf("client error %v, want a lost device naming the compile", err)
	}
	// A legitimate host still gets the local device's results.
	m := tinyModel(t)
	want := forward(t, m, localGPU(t))
	got := forward(t, m, dial(t, url, Options{}))
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("after the crashes, step %d logit %d: remote %v, local %v", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// A new session never reads what an earlier one left in device memory:
// output buffers that a kernel never writes read as zeros, though the
// earlier session freed buffers of the same size full of its data. On
// WebGPU the pool is released (wgpu zeroes new buffers); on Vulkan, whose
// arena hands the freed ranges out again, they are zeroed.
func TestSessionsGetZeroedBuffers(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{{"webgpu", nil}, {"vulkan", []string{vulkanEnv + "=1"}}} {
		t.Run(tc.name, func(t *testing.T) { checkZeroedBuffers(t, tc.env) })
	}
}

func checkZeroedBuffers(t *testing.T, env []string) {
	workers := testWorkers(t, 1, env...) // one worker: sessions follow each other on it
	_, url := serve(t, ServerOptions{Workers: workers})
	secret := floats(512, 7)
	for round := 0; round < 2; round++ {
		h := rawDial(t, url)
		hello(h)
		h.must(proto.Encode(2, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{512}, Data: secret}), proto.TOK)
		h.must(proto.Encode(3, kernel(1, "b[id.x] = a[id.x];")), proto.TOK)                        // a copy
		h.must(proto.Encode(4, kernel(2, "if (a[0] == 12345.0f) { b[id.x] = 1.0f; }")), proto.TOK) // writes nothing here
		if round == 0 {
			// The earlier host: copies its secret into several buffers
			// and frees them (into the device's pool).
			for i := uint32(0); i < 4; i++ {
				h.must(proto.Encode(5+i, launch(1, 1, 10+i)), proto.TOK)
			}
			d := h.must(proto.Encode(20, &proto.Download{Buf: 10, Length: 2048}), proto.TData).(*proto.Data)
			if string(d.Data) != string(secret) {
				t.Fatal("the copy kernel did not copy")
			}
			h.must(proto.Encode(21, &proto.Batch{Cmds: []proto.Cmd{{Kind: proto.CmdFree, Buf: 10}, {Kind: proto.CmdFree, Buf: 11},
				{Kind: proto.CmdFree, Buf: 12}, {Kind: proto.CmdFree, Buf: 13}}}), proto.TOK)
			h.c.Close(websocket.StatusNormalClosure, "")
			waitIdle(t, workers)
			continue
		}
		for i := uint32(0); i < 4; i++ {
			h.must(proto.Encode(5+i, launch(2, 1, 10+i)), proto.TOK)
			d := h.must(proto.Encode(20+i, &proto.Download{Buf: 10 + i, Length: 2048}), proto.TData).(*proto.Data)
			if string(d.Data) != string(make([]byte, 2048)) {
				t.Fatalf("output %d of a new session holds data it never wrote: %v...", i, d.Data[:16])
			}
		}
	}
}

// Without a token only requests that name this server (loopback or a
// listed name) are served; with one, any name is.
func TestHostHeader(t *testing.T) {
	s := NewServer(ServerOptions{Relay: true, AllowedHosts: []string{"gpu.lan"}})
	for host, want := range map[string]bool{
		"127.0.0.1:8765": true, "localhost:1": true, "LOCALHOST.:1": true, "a.localhost": true, "[::1]:8765": true,
		"gpu.lan:8765": true, "127.0.0.2": true,
		"evil.example:8765": false, "localhost.evil.example": false, "10.0.0.5:8765": false, "": false, "[::2]:1": false,
	} {
		if got := s.hostAllowed(host); got != want {
			t.Errorf("Host %q: allowed %v, want %v", host, got, want)
		}
	}
	if !NewServer(ServerOptions{Token: "t"}).hostAllowed("evil.example") {
		t.Error("with a token, every Host is served")
	}
	_, url := serve(t, ServerOptions{Relay: true})
	req, _ := http.NewRequest("GET", "http"+strings.TrimPrefix(url, "ws")+"/", nil)
	req.Host = "rebound.attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a rebound Host got %s", resp.Status)
	}
}

// Unauthenticated peers cannot make the server read large frames, open
// many connections or guess tokens quickly.
func TestPreAuthLimits(t *testing.T) {
	_, url := serve(t, ServerOptions{Relay: true, Token: "s3cret", MaxConns: 3, AttachWait: 100 * time.Millisecond})
	// A 1 MiB handshake ends the connection; nothing that size is kept.
	h := rawDial(t, url)
	big := proto.Encode(1, &proto.Hello{Version: proto.Version, Token: "x", Client: strings.Repeat("a", 200)})
	big = append(big, make([]byte, 1<<20)...)
	if m, err := h.send(big); err == nil {
		if e, ok := m.(*proto.Error); !ok || e.Code != proto.CodeMalformed {
			t.Errorf("a 1 MiB handshake: %+v", m)
		}
	}
	h.c.CloseNow()
	time.Sleep(100 * time.Millisecond)
	// Connections over the cap are refused before the upgrade.
	var open []*websocket.Conn
	for i := 0; i < 3; i++ {
		c, _, err := websocket.Dial(context.Background(), url, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.CloseNow()
		open = append(open, c)
	}
	if _, resp, err := websocket.Dial(context.Background(), url, nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a 4th connection: %v", err)
	}
	for _, c := range open {
		c.CloseNow()
	}
	time.Sleep(100 * time.Millisecond)
	// Five wrong tokens, then even the right one is refused for a while.
	for i := 0; i < authMaxFails; i++ {
		if _, err := DialOptions(context.Background(), url, Options{Token: "guess"}); err == nil || !strings.Contains(err.Error(), "wrong token") {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, err := DialOptions(context.Background(), url, Options{Token: "s3cret"}); err == nil || !strings.Contains(err.Error(), "too many wrong tokens") {
		t.Errorf("after %d guesses: %v", authMaxFails, err)
	}
}

// The host refuses a server that speaks another protocol version, and
// prints the server's text with control characters escaped.
func TestHostDistrustsServer(t *testing.T) {
	info := proto.DeviceInfo{Name: "evil\x1b[2J", Description: "line\nforged"}
	var mu sync.Mutex
	version, message := uint32(proto.Version+1), ""
	fake := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		_, b, err := c.Read(r.Context())
		if err != nil {
			return
		}
		mu.Lock()
		v, msg := version, message
		mu.Unlock()
		if msg != "" {
			c.Write(r.Context(), websocket.MessageBinary, proto.Encode(proto.PeekID(b), proto.Errorf(proto.CodeFailed, "%s", msg)))
			return
		}
		c.Write(r.Context(), websocket.MessageBinary, proto.Encode(proto.PeekID(b), &proto.HelloOK{Version: v, Info: info}))
		for {
			_, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			c.Write(r.Context(), websocket.MessageBinary, proto.Encode(proto.PeekID(b), proto.Errorf(proto.CodeFailed, "boom\x1b]0;owned\x07")))
		}
	})
	srv := httptestServer(t, fake)
	if _, err := DialOptions(context.Background(), srv, Options{}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("protocol version mismatch: the server speaks version %d, this host %d", proto.Version+1, proto.Version)) {
		t.Errorf("another version: %v", err)
	}
	mu.Lock()
	version = proto.Version
	mu.Unlock()
	d := dial(t, srv, Options{})
	if strings.ContainsAny(d.Name()+d.Info().Description, "\x1b\n") {
		t.Errorf("name %q, description %q keep control characters", d.Name(), d.Info().Description)
	}
	err := d.Sync()
	if err == nil || !strings.Contains(err.Error(), `boom\x1b]0;owned\x07`) {
		t.Errorf("an error reply: %q, want its control characters escaped", err)
	}
	mu.Lock()
	message = "refused\x1b[31m"
	mu.Unlock()
	if _, err := DialOptions(context.Background(), srv, Options{}); err == nil || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("a refusal: %q", err)
	}
}

// The fuzz target's server lives as long as the test process.
var (
	fuzzOnce sync.Once
	fuzzURL  string
)

// FuzzServerFrames feeds frames to a running server (its handler, real
// worker processes, the real GPU): the input is a sequence of frames, each
// preceded by a 2-byte length; a leading 0 byte sends them before the
// hello, as an unauthenticated peer. Every frame gets one decodable reply
// until the server ends the connection (after a refusal or a lost
// worker), and the server always accepts the next host.
func FuzzServerFrames(f *testing.F) {
	seq := [][]byte{
		proto.Encode(2, &proto.Upload{Buf: 1, DType: proto.F32, Shape: []uint32{512}, Data: floats(512, 1)}),
		proto.Encode(3, kernel(1, "b[id.x] = a[id.x] * 2.0;")),
		proto.Encode(4, launch(1, 1, 2)),
		proto.Encode(5, &proto.Download{Buf: 2, Length: 2048}),
		proto.Encode(6, &proto.Compile{Kernel: 2, Language: "wgsl", Entry: "main", Source: []byte("fn main() { \xff }"), Workgroup: [3]uint32{1, 1, 1}}),
		proto.Encode(7, &proto.Reset{}),
	}
	var all []byte
	for _, fr := range seq {
		all = binary.LittleEndian.AppendUint16(all, uint16(len(fr)))
		all = append(all, fr...)
	}
	f.Add(append([]byte{1}, all...))
	f.Add(append([]byte{0}, all...))
	f.Add([]byte{1, 8, 0, 'T', 'M', 99, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzOnce.Do(func() {
			w, err := StartWorkers(WorkerOptions{MaxSessions: 2, Command: func() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") }})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(NewServer(ServerOptions{Workers: w}))
			fuzzURL = "ws" + strings.TrimPrefix(srv.URL, "http")
		})
		if len(in) == 0 {
			return
		}
		h := rawDial(t, fuzzURL)
		defer h.c.CloseNow()
		if in[0] != 0 {
			hello(h)
		}
		for in = in[1:]; len(in) >= 2; {
			n := min(int(binary.LittleEndian.Uint16(in)), len(in)-2)
			fr := in[2 : 2+n]
			in = in[2+n:]
			m, err := h.send(fr)
			if err != nil {
				break // the server ended the connection
			}
			if e, ok := m.(*proto.Error); ok && (e.Code == proto.CodeLost || e.Code == proto.CodeAuth || e.Code == proto.CodeVersion) {
				break
			}
		}
		h.c.CloseNow()
		next := rawDial(t, fuzzURL)
		hello(next)
		next.must(proto.Encode(2, &proto.Sync{}), proto.TOK)
	})
}
