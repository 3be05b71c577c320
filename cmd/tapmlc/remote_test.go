package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tapml/tapml/frontend/gguf"
	"github.com/tapml/tapml/internal/testenv"
	"github.com/tapml/tapml/runtime"
)

// Remote targets: `tapmlc serve` runs as a separate process (the built
// binary, on a free port); `tapmlc run` and `tapmlc test` use it with
// --target remote:ws://HOST:PORT.

// server is a running `tapmlc serve`.
type server struct {
	url string // ws://127.0.0.1:PORT
	cmd *exec.Cmd
	mu  sync.Mutex
	log bytes.Buffer
}

func (s *server) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

var listening = regexp.MustCompile(`listening on (ws://[0-9.]+:[0-9]+)`)

// serve starts `tapmlc serve --listen 127.0.0.1:0 ARGS...` and waits for
// the line that says where it listens.
func serve(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary_, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		close(found)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("tapmlc serve %s stderr:\n%s", strings.Join(args, " "), s.stderr())
		}
	})
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("tapmlc serve exited: %s", s.stderr())
		}
		s.url = u
	case <-time.After(3 * time.Minute): // --browser builds the wasm program first
		t.Fatalf("tapmlc serve did not say where it listens: %s", s.stderr())
	}
	return s
}

var (
	bundleOnce sync.Once
	bundlePath string
	bundleErr  string
)

// carvedBundle carves stories260K once per test binary (24 steps).
func carvedBundle(t *testing.T) string {
	t.Helper()
	dir := models(t)
	bundleOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "tapml-remote-bundle")
		if err != nil {
			bundleErr = err.Error()
			return
		}
		bundlePath = filepath.Join(tmp, "tests")
		r := tapmlc(t, "carve", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
			"--prompt", "Once upon a time", "--steps", "24", "-o", bundlePath)
		if r.code != 0 {
			bundleErr = r.stderr
		}
	})
	if bundleErr != "" {
		t.Fatalf("carve: %s", bundleErr)
	}
	return bundlePath
}

// checkRemote replays the carved bundle and runs the full greedy story on
// a remote target.
func checkRemote(t *testing.T, url string) {
	t.Helper()
	dir := models(t)
	bundle := carvedBundle(t)
	r := tapmlc(t, "test", bundle, "--target", "remote:"+url)
	if r.code != 0 || !strings.Contains(r.stdout, " 0 failed") {
		t.Errorf("test on remote:%s: exit %d\n%s\n%s", url, r.code, unpassed(r.stdout), r.stderr)
	} else {
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		t.Log(lines[len(lines)-1])
	}
	r = tapmlc(t, "run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--steps", "256", "--temperature", "0", "--target", "remote:"+url)
	if want := golden(t, "stories260K_greedy.golden"); r.code != 0 || r.stdout != want {
		t.Errorf("run on remote:%s: exit %d\ngot  %q\nwant %q\n%s", url, r.code, r.stdout, want, r.stderr)
	}
}

// unpassed keeps the lines of a test table that are not passing cases (the
// header, failures, where in the grid they sit, the summary), so that a
// failure's message shows them rather than hundreds of passing rows.
func unpassed(table string) string {
	var keep []string
	for _, l := range strings.Split(table, "\n") {
		if !strings.HasSuffix(strings.TrimSpace(l), " pass") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// The carved bundle passes on a served WebGPU device, and run prints the
// CPU's text; the server logs each host.
func TestRemoteServe(t *testing.T) {
	s := serve(t, nil)
	checkRemote(t, s.url)
	if log := s.stderr(); !strings.Contains(log, "connected") || !strings.Contains(log, "disconnected after") {
		t.Errorf("the server did not log the hosts: %s", log)
	}
	// migrate moves the model onto the remote device too.
	dir := models(t)
	r := tapmlc(t, "migrate", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--prompt", "Once upon a time", "--steps", "8", "--target", "remote:"+s.url)
	if r.code != 0 {
		t.Errorf("migrate on remote: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// `tapmlc serve --vulkan` serves tapml's own Vulkan device, which lists
// shader-f16 on lavapipe: with --compute f16 a remote run stores f32
// tensors as f16 there and prints exactly what --target vulkan --compute
// f16 prints (the same kernels on the same device), and a bundle carved
// under f16 passes on it; at f32 the carved bundle passes and the greedy
// story is the CPU's (checkRemote).
func TestRemoteVulkan(t *testing.T) {
	s := serve(t, nil, "--vulkan")
	dir := models(t)
	gen := []string{"run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--prompt", "Once upon a time", "--steps", "48", "--temperature", "0", "--compute", "f16"}
	want := tapmlc(t, append(gen, "--target", "vulkan")...)
	got := tapmlc(t, append(gen, "-v", "--target", "remote:"+s.url)...)
	if want.code != 0 || got.code != 0 || got.stdout != want.stdout {
		t.Errorf("--compute f16: remote exit %d, vulkan exit %d\nremote %q\nvulkan %q\n%s%s", got.code, want.code, got.stdout, want.stdout, got.stderr, want.stderr)
	}
	if log := s.stderr(); !strings.Contains(log, "device vulkan:") || !strings.Contains(log, "with shader-f16") {
		t.Errorf("the server's log does not name its Vulkan device with shader-f16: %s", log)
	}
	if strings.Contains(got.stderr, "computing in f32") || !strings.Contains(got.stderr, "held as f16 (--compute f16)") {
		t.Errorf("--compute f16 on serve --vulkan: stderr %q, want f32 weights held as f16 and no fallback note", got.stderr)
	}
	r := tapmlc(t, "test", carvedF16Bundle(t), "--target", "remote:"+s.url)
	if r.code != 0 || !strings.Contains(r.stdout, " 0 failed") || strings.Contains(r.stderr, "computing in f32") {
		t.Errorf("the f16 bundle on serve --vulkan: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checkRemote(t, s.url)
	if r := tapmlc(t, "serve", "--browser", "--vulkan"); r.code != 1 || !strings.Contains(r.stderr, "--browser and --vulkan exclude each other") {
		t.Errorf("serve --browser --vulkan: exit %d: %s", r.code, r.stderr)
	}
}

// A device server whose buffers are capped at 16 KiB ($TAPML_MAX_BUFFER:
// its wgpu device is asked for no more) reports the limits, and the host
// splits stories260K's weights to fit them: the greedy text is the CPU's.
// 64 steps keep the KV caches at 8 KiB.
func TestRemoteSmallBuffers(t *testing.T) {
	s := serve(t, []string{runtime.MaxBufferEnv + "=16KiB"})
	checkSplitRun(t, s.url)
}

// checkSplitRun runs stories260K on a remote device whose buffers are
// capped at 16 KiB and on the CPU: the texts must be the same.
func checkSplitRun(t *testing.T, url string) {
	t.Helper()
	dir := models(t)
	args := []string{"run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--steps", "64", "--temperature", "0", "--prompt", "Once upon a time"}
	want := tapmlc(t, append(args, "--target", "cpu")...)
	got := tapmlc(t, append(args, "-v", "--target", "remote:"+url)...)
	if got.code != 0 || got.stdout != want.stdout || !strings.Contains(got.stderr, "max buffer 16384 bytes, max storage binding 16384 bytes; split ") {
		t.Errorf("on remote:%s with 16 KiB buffers: exit %d\ngot  %q\nwant %q\n%s", url, got.code, got.stdout, want.stdout, got.stderr)
	}
}

// A wrong or missing token is refused, with a clear message on both sides.
func TestRemoteToken(t *testing.T) {
	s := serve(t, []string{"TAPML_TOKEN="}, "--token", "s3cret")
	dir := models(t)
	runArgs := func(target string) []string {
		return []string{"run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
			"--steps", "16", "--temperature", "0", "--target", target}
	}
	for _, tc := range []struct{ target, want string }{
		{"remote:" + s.url, "requires a token"},
		{"remote:" + s.url + "?token=guess", "wrong token"},
	} {
		r := tapmlc(t, runArgs(tc.target)...)
		if r.code != 1 || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a refusal saying %q", tc.target, r.code, r.stdout, r.stderr, tc.want)
		}
		if strings.Contains(r.stderr, "guess") {
			t.Errorf("the error shows the token: %s", r.stderr)
		}
	}
	// With the right token, and --compute f16: a native server's device
	// has no shader-f16, so the run says so in one line (naming the device,
	// not the token) and prints the CPU's f32 text.
	want := tapmlc(t, runArgs("cpu")...)
	r := tapmlc(t, append(runArgs("remote:"+s.url+"?token=s3cret"), "--compute", "f16")...)
	note := "remote(" + s.url + "):webgpu"
	if r.code != 0 || r.stdout != want.stdout {
		t.Errorf("the right token, --compute f16: exit %d\ngot  %q\nwant %q\n%s", r.code, r.stdout, want.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, note) || !strings.Contains(r.stderr, "has no shader-f16") ||
		!strings.Contains(r.stderr, "computing in f32") || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("--compute f16 on a native server: stderr %q, want a note that %s has no shader-f16 (and no token)", r.stderr, note)
	}
	cmd := exec.Command(binary_, runArgs("remote:"+s.url)...)
	cmd.Env = append(os.Environ(), "TAPML_TOKEN=s3cret")
	if out, err := cmd.Output(); err != nil || len(out) == 0 {
		t.Errorf("the token from $TAPML_TOKEN: %v", err)
	}
	if log := s.stderr(); strings.Count(log, "refused") < 2 || strings.Contains(log, "guess") {
		t.Errorf("the server log should note two refusals without the tokens: %s", log)
	}
}

// Killing the server mid-run ends the run at once with an error naming the
// device and what was in flight, not a hang.
func TestRemoteServerKilled(t *testing.T) {
	s := serve(t, nil)
	dir := models(t)
	cmd := exec.Command(binary_, "run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--steps", "256", "--temperature", "0", "--target", "remote:"+s.url)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the story has begun, kill the server.
	first := make([]byte, 1)
	if _, err := io.ReadFull(out, first); err != nil {
		t.Fatalf("no output from run: %v: %s", err, errb.String())
	}
	s.cmd.Process.Kill()
	killed := time.Now()
	go io.Copy(io.Discard, out)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("run still going 30 s after the server was killed: %s", errb.String())
	}
	t.Logf("run ended %s after the kill: %s", time.Since(killed).Round(time.Millisecond), strings.TrimSpace(errb.String()))
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("run: %v, want exit 1", err)
	}
	msg := errb.String()
	if !strings.Contains(msg, "remote device "+s.url+": connection lost during ") || strings.Contains(msg, "panic") {
		t.Errorf("stderr %q: want a lost connection to %s", msg, s.url)
	}
}

// The browser device: headless Chromium opens the page `tapmlc serve
// --browser` serves, the page attaches, the carved bundle passes on the
// browser's WebGPU (every kernel of it compiled by Chrome's Tint), and run
// prints the CPU's text.
func TestBrowserDevice(t *testing.T) {
	s := serve(t, nil, "--browser", "--cache-dir", filepath.Join(os.TempDir(), "tapml-browser-test-cache"))
	ctx := openPage(t, s, true)
	pageLog := func() string {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, _ := chromedp.Run(lctx, chromedp.Evaluate[string](`document.getElementById("log").textContent`))
		return l
	}
	defer func() {
		if t.Failed() {
			t.Logf("page log:\n%s", pageLog())
		}
	}()
	waitAttached(t, ctx)
	if log := s.stderr(); !strings.Contains(log, "attached: browser:") {
		t.Errorf("the server did not log the page: %s", log)
	}
	checkRemote(t, s.url)
	// A Q4_0 model's blocks cross to the page as they are; Chrome's Tint
	// compiles the kernels that decode them.
	q := storiesGGUF(t, gguf.GGMLQ4_0)
	args := []string{"run", q, "--steps", "16", "--temperature", "0", "--prompt", "w260 w261"}
	want := tapmlc(t, append(args, "--target", "cpu")...)
	if got := tapmlc(t, append(args, "--target", "remote:"+s.url)...); got.code != 0 || got.stdout != want.stdout {
		t.Errorf("Q4_0 on the page: exit %d\ngot  %q\nwant %q\n%s", got.code, got.stdout, want.stdout, got.stderr)
	}
	checkBrowserF16(t, ctx, s.url, args, want.stdout)
	if st, err := chromedp.Run(ctx, chromedp.Evaluate[string](`globalThis.tapmlStatus`)); err != nil || st != "attached" {
		t.Errorf("after the runs the page says %q (%v)", st, err)
	}
}

// checkBrowserF16 runs args with --compute f16 on the page. The page asks
// its browser for shader-f16 where the adapter offers it and the host
// reads it from the handshake. Without it (Chromium's SwiftShader, here)
// the run's note says the device has none and the run computes in f32,
// printing want (the CPU's f32 text); with it the run computes in f16 as
// on a `serve --vulkan` device (TestRemoteVulkanF16), without a note.
func checkBrowserF16(t *testing.T, ctx context.Context, url string, args []string, want string) {
	t.Helper()
	has, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`navigator.gpu.requestAdapter().then(a => a.features.has("shader-f16"))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("asking the page's adapter for shader-f16: %v", err)
	}
	t.Logf("the page's adapter offers shader-f16: %v", has)
	r := tapmlc(t, append(args, "--target", "remote:"+url, "--compute", "f16")...)
	if has {
		if r.code != 0 || strings.Contains(r.stderr, "computing in f32") {
			t.Errorf("--compute f16 on a page with shader-f16: exit %d, want 0 and f16 compute\n%s", r.code, r.stderr)
		}
		return
	}
	if r.code != 0 || r.stdout != want {
		t.Errorf("--compute f16 on the page: exit %d\ngot  %q\nwant %q\n%s", r.code, r.stdout, want, r.stderr)
	}
	if !strings.Contains(r.stderr, "remote("+url+"):browser:") || !strings.Contains(r.stderr, "has no shader-f16") || !strings.Contains(r.stderr, "computing in f32") {
		t.Errorf("--compute f16 on the page: stderr %q, want a note that the page's device has no shader-f16", r.stderr)
	}
}

// waitAttached waits until the page has attached to its server.
func waitAttached(t *testing.T, ctx context.Context) {
	t.Helper()
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer pcancel()
	st, err := chromedp.Run(pctx, chromedp.Poll[string](`globalThis.tapmlStatus === "attached" || globalThis.tapmlStatus.startsWith("error") || globalThis.tapmlStatus.startsWith("refused") ? globalThis.tapmlStatus : false`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	if err != nil || st != "attached" {
		t.Fatalf("the page did not attach: status %q, %v", st, err)
	}
}

// A page opened with ?max_buffer=16KiB asks its browser for 16 KiB
// buffers and bindings, as a constrained browser would give; the host
// splits the weights to fit and prints the CPU's text.
func TestBrowserSmallBuffers(t *testing.T) {
	s := serve(t, nil, "--browser", "--cache-dir", filepath.Join(os.TempDir(), "tapml-browser-test-cache"))
	waitAttached(t, openPageQuery(t, s, true, "?max_buffer=16KiB"))
	checkSplitRun(t, s.url)
}

// openPage opens the page of a `tapmlc serve --browser` server in headless
// Chromium, with WebGPU enabled (--enable-unsafe-webgpu) or as Chromium
// ships on Linux, without it.
func openPage(t *testing.T, s *server, webGPU bool) context.Context {
	t.Helper()
	return openPageQuery(t, s, webGPU, "")
}

// openPageQuery opens the page with a query (?max_buffer=16KiB).
func openPageQuery(t *testing.T, s *server, webGPU bool, query string) context.Context {
	t.Helper()
	page := "http" + strings.TrimPrefix(s.url, "ws") + "/" + query
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(testenv.Tool(t, "chromium")),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// On a loaded machine SwiftShader's dispatches can hold the GPU
		// thread past the watchdog's limit, which kills the GPU process
		// and loses the page's device in the middle of a test (the likeliest
		// cause found for a CI failure that did not recur here).
		chromedp.Flag("disable-gpu-watchdog", true),
	}
	if webGPU {
		opts = append(opts, chromedp.Flag("enable-unsafe-webgpu", true))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("opening %s: %v", page, err)
	}
	return ctx
}

// Without --enable-unsafe-webgpu, Chromium on Linux gives the page no
// adapter: the page says so and how to fix it, and a host fails within
// seconds with that message instead of waiting for a page.
func TestBrowserWithoutWebGPU(t *testing.T) {
	s := serve(t, nil, "--browser", "--cache-dir", filepath.Join(os.TempDir(), "tapml-browser-test-cache"))
	ctx := openPage(t, s, false)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := chromedp.Run(pctx, chromedp.Poll[string](`globalThis.tapmlStatus.startsWith("error") || globalThis.tapmlStatus === "attached" ? globalThis.tapmlStatus : false`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	if err != nil || !strings.Contains(st, "--enable-unsafe-webgpu") {
		t.Fatalf("page status %q (%v), want an error naming --enable-unsafe-webgpu", st, err)
	}
	start := time.Now()
	r := tapmlc(t, "run", "--target", "remote:"+s.url, "--prompt", "hi", "--steps", "4")
	if r.code == 0 || !strings.Contains(r.stderr, "could not start") || !strings.Contains(r.stderr, "--enable-unsafe-webgpu") {
		t.Errorf("run: exit %d, stderr %q", r.code, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the host took %s to fail", d)
	}
}
