package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	rproto "github.com/tapml/tapml/runtime/remote/proto"
)

// The hostile-input suite: the classes of issue 18 replayed against the
// built tapmlc and a running `tapmlc serve`, as an attacker or a careless
// user would. Each attack is judged on four counts, reported as a table:
// a crash (a panic, a signal, or an exit status other than 0, 1 and 2), a
// hang (no exit within attackTimeout), a wrong exit (not the expected exit
// status or message), and data lost or leaked (a device, FIFO or link
// replaced, an old output gone, another session's values read). After
// every attack on the server, a legitimate remote run must print the CPU
// reference's text.

const attackTimeout = 20 * time.Second

// attack is one hostile input.
type attack struct {
	class, name string
	args        []string
	code        int    // expected exit status
	want        string // expected in stderr (a regular expression)
	// damage, when set, checks afterwards that nothing was lost or
	// leaked; it returns what was, or "".
	damage func() string
}

// verdict is the outcome of one attack.
type verdict struct {
	crash, hang, wrongExit, lost bool
	detail                       string
}

func runAttack(t *testing.T, a attack) verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), attackTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary_, a.args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var v verdict
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	stderr := errb.String()
	switch {
	case ctx.Err() != nil:
		v.hang, v.detail = true, "no exit within "+attackTimeout.String()
	case code < 0 || code > 2 || strings.Contains(stderr, "panic:") || strings.Contains(stderr, "goroutine "):
		v.crash, v.detail = true, fmt.Sprintf("exit %d: %.300s", code, stderr)
	case code != a.code || !regexp.MustCompile(a.want).MatchString(stderr):
		v.wrongExit, v.detail = true, fmt.Sprintf("exit %d (want %d), stderr %.300q (want /%s/)", code, a.code, stderr, a.want)
	}
	if a.damage != nil {
		if d := a.damage(); d != "" {
			v.lost, v.detail = true, v.detail+" "+d
		}
	}
	return v
}

// table tallies verdicts by class and logs them as the table.
type table struct {
	rows  map[string]*[5]int // attacks, crashes, hangs, wrong exits, lost or leaked
	order []string
}

func (tb *table) add(class string, v verdict) {
	if tb.rows == nil {
		tb.rows = map[string]*[5]int{}
	}
	r := tb.rows[class]
	if r == nil {
		r = &[5]int{}
		tb.rows[class] = r
		tb.order = append(tb.order, class)
	}
	r[0]++
	for i, b := range []bool{v.crash, v.hang, v.wrongExit, v.lost} {
		if b {
			r[i+1]++
		}
	}
}

func (tb *table) String() string {
	var b strings.Builder
	var total [5]int
	fmt.Fprintf(&b, "%-34s %7s %7s %5s %11s %15s\n", "class", "attacks", "crashes", "hangs", "wrong exits", "lost or leaked")
	for _, c := range tb.order {
		r := tb.rows[c]
		fmt.Fprintf(&b, "%-34s %7d %7d %5d %11d %15d\n", c, r[0], r[1], r[2], r[3], r[4])
		for i := range total {
			total[i] += r[i]
		}
	}
	fmt.Fprintf(&b, "%-34s %7d %7d %5d %11d %15d\n", "total", total[0], total[1], total[2], total[3], total[4])
	return b.String()
}

// stillKind reports "" when path still is what it was (a FIFO, a device, a
// symbolic link), or what changed.
func stillKind(path string, mode os.FileMode) func() string {
	return func() string {
		st, err := os.Lstat(path)
		if err != nil || st.Mode().Type() != mode.Type() {
			return fmt.Sprintf("%s was replaced (%v, %v)", path, st, err)
		}
		return ""
	}
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func copyTree(t *testing.T, from, to string) string {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	return to
}

// fileAttacks are the file and flag classes (6 to 11 of the issue).
func fileAttacks(t *testing.T, tmp string) []attack {
	dir := models(t)
	model, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	fifo := mkfifo(t, filepath.Join(tmp, "fifo"))
	nullLink := filepath.Join(tmp, "null-link")
	os.Symlink("/dev/null", nullLink)

	// A small carved bundle and damaged copies of it.
	bundle := filepath.Join(tmp, "bundle")
	if r := tapmlc(t, "carve", "--steps", "4", "-o", bundle); r.code != 0 {
		t.Fatalf("carve: %s", r.stderr)
	}
	manifest, _ := os.ReadFile(filepath.Join(bundle, carve.ManifestFile))
	damaged := func(name string, edit func(m []byte) []byte) string {
		d := copyTree(t, bundle, filepath.Join(tmp, name))
		writeFile(t, filepath.Join(d, carve.ManifestFile), edit(bytes.Clone(manifest)))
		return d
	}
	fifoBundle := copyTree(t, bundle, filepath.Join(tmp, "fifo-bundle"))
	os.Remove(filepath.Join(fifoBundle, carve.ManifestFile))
	mkfifo(t, filepath.Join(fifoBundle, carve.ManifestFile))
	replace := func(old, new string) func([]byte) []byte {
		return func(m []byte) []byte { return bytes.Replace(m, []byte(old), []byte(new), 1) }
	}

	// A llama2.c header claiming a 2^21-token context: the 260K model's
	// header with seq_len patched, its RoPE tables dropped (so the size
	// checks hold).
	ckpt, _ := os.ReadFile(model)
	binary.LittleEndian.PutUint32(ckpt[24:], 1<<21)
	bigSeq := writeFile(t, filepath.Join(tmp, "seq2m.bin"), ckpt[:1040156])

	// IR text whose weights' source is a FIFO.
	tir := filepath.Join(tmp, "m.tir")
	if r := tapmlc(t, "import", model, "-o", tir); r.code != 0 {
		t.Fatalf("import: %s", r.stderr)
	}
	text, _ := os.ReadFile(tir)
	fifoTir := writeFile(t, filepath.Join(tmp, "fifo.tir"), bytes.Replace(text, []byte(model), []byte(fifo), 1))

	// An ONNX graph with no outputs.
	noOut, _ := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("g"), Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"),
			Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(1),
				Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}},
			Node: []*onnxpb.NodeProto{{OpType: proto.String("Relu"), Input: []string{"x"}, Output: []string{"y"}}}}})
	noOutputs := writeFile(t, filepath.Join(tmp, "noout.onnx"), noOut)

	deep := writeFile(t, filepath.Join(tmp, "deep.yaml"), []byte("passes: "+strings.Repeat("[", 100000)))
	longName := writeFile(t, filepath.Join(tmp, "long.yaml"), []byte("passes:\n  - "+strings.Repeat("x", 10<<20)+"\n"))
	nanTol := writeFile(t, filepath.Join(tmp, "nan.yaml"), []byte("overrides:\n  - op: matmul\n    atol: NaN\n"))
	negTol := writeFile(t, filepath.Join(tmp, "neg.yaml"), []byte("policy:\n  contraction: -1\n"))
	bigScale := writeFile(t, filepath.Join(tmp, "scale.yaml"), []byte("overrides:\n  - op: matmul\n    scale: 1e300\n"))
	deepTol := writeFile(t, filepath.Join(tmp, "deeptol.yaml"), []byte("overrides: "+strings.Repeat("{a: ", 50000)))

	// Outputs that must not be replaced; the bundle as an output must
	// survive a refused write.
	sock := filepath.Join(tmp, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	oldTir := writeFile(t, filepath.Join(tmp, "old.tir"), []byte("keep me"))
	linkTir := filepath.Join(tmp, "link.tir")
	os.Symlink(oldTir, linkTir)
	run := []string{"run", model, "--tokenizer", tok, "--steps", "8", "--temperature", "0"}
	test := func(extra ...string) []string { return append([]string{"test", bundle, "--target", "cpu"}, extra...) }
	out := []attack{
		// 6. Unbounded reads.
		{"6 unbounded reads", "--pipeline /dev/zero", []string{"compile", "--pipeline", "/dev/zero", "-o", filepath.Join(tmp, "b1")}, 1, "/dev/zero: a character device, not a regular file", nil},
		{"6 unbounded reads", "--pipeline FIFO", []string{"compile", "--pipeline", fifo, "-o", filepath.Join(tmp, "b2")}, 1, "fifo: a named pipe", nil},
		{"6 unbounded reads", "--tolerances FIFO", test("--tolerances", fifo), 2, "fifo: a named pipe", nil},
		{"6 unbounded reads", "--tolerances /dev/zero", test("--tolerances", "/dev/zero"), 2, "not a regular file", nil},
		{"6 unbounded reads", "model /dev/zero", append([]string{"run", "/dev/zero"}, run[2:]...), 1, "/dev/zero: a character device", nil},
		{"6 unbounded reads", "model FIFO", append([]string{"run", fifo}, run[2:]...), 1, "fifo: a named pipe", nil},
		{"6 unbounded reads", "--tokenizer FIFO", []string{"run", model, "--tokenizer", fifo, "--steps", "4"}, 1, "not a regular file", nil},
		{"6 unbounded reads", "bundle manifest FIFO", []string{"test", fifoBundle, "--target", "cpu"}, 2, "manifest.yaml: a named pipe", nil},
		{"6 unbounded reads", "IR text source FIFO", append([]string{"run", fifoTir}, run[2:]...), 1, "fifo: a named pipe", nil},
		{"6 unbounded reads", "--input /dev/zero", []string{"run", filepath.Join(dir, "mnist-8_cntk.onnx"), "--input", "/dev/zero"}, 1, "/dev/zero: a character device", nil},
		// 7. YAML depth.
		{"7 YAML depth", "pipeline 100,000 [", []string{"compile", "--pipeline", deep, "-o", filepath.Join(tmp, "b3")}, 1, "deep.yaml:1: nested more than 64 levels deep", nil},
		{"7 YAML depth", "tolerances 50,000 {", test("--tolerances", deepTol), 2, "deeptol.yaml:1: nested more than 64", nil},
		{"7 YAML depth", "manifest 100,000 [", []string{"test", damaged("deep-bundle", func([]byte) []byte { return []byte("format: " + strings.Repeat("[", 100000)) }), "--target", "cpu"}, 2, "manifest.yaml:1: nested more than 64", nil},
		// 8. Outputs.
		{"8 outputs", "-o a FIFO", []string{"import", "-o", fifo}, 1, "fifo: a named pipe \\(FIFO\\), not a regular file: refusing to replace it", stillKind(fifo, os.ModeNamedPipe)},
		{"8 outputs", "-o a link to /dev/null", []string{"import", "-o", nullLink}, 1, "a symbolic link to /dev/null \\(a character device\\)", stillKind(nullLink, os.ModeSymlink)},
		{"8 outputs", "-o a socket", []string{"import", "-o", sock}, 1, "a socket", stillKind(sock, os.ModeSocket)},
		{"8 outputs", "--json a FIFO", test("--json", fifo), 2, "refusing to replace it", stillKind(fifo, os.ModeNamedPipe)},
		{"8 outputs", "--junit a link to /dev/null", test("--junit", nullLink), 2, "refusing to replace it", stillKind(nullLink, os.ModeSymlink)},
		{"8 outputs", "--html a FIFO", test("--html", fifo), 2, "refusing to replace it", stillKind(fifo, os.ModeNamedPipe)},
		{"8 outputs", "carve -o a FIFO", []string{"carve", "--steps", "2", "-o", fifo}, 1, "not a folder", stillKind(fifo, os.ModeNamedPipe)},
		{"8 outputs", "compile -o a FIFO", []string{"compile", "-o", fifo}, 1, "not a folder", stillKind(fifo, os.ModeNamedPipe)},
		{"8 outputs", "-o a link to a file (written through)", []string{"import", "-o", linkTir}, 0, "", func() string {
			if st, err := os.Lstat(linkTir); err != nil || st.Mode()&os.ModeSymlink == 0 {
				return "the link was replaced"
			}
			if b, _ := os.ReadFile(oldTir); !bytes.HasPrefix(b, []byte("module ")) {
				return "the link's target was not written"
			}
			return ""
		}},
		// 9. Numbers that are not numbers.
		{"9 numbers", "NaN tolerance in a manifest", []string{"test", damaged("nan-bundle", replace("\n      atol: ", "\n      atol: .nan\n      #")), "--target", "cpu"}, 2, "tolerance atol NaN is not a finite number", nil},
		{"9 numbers", "NaN --tolerances", test("--tolerances", nanTol), 2, "nan.yaml:3: atol: must be finite", nil},
		{"9 numbers", "negative policy", test("--tolerances", negTol), 2, "neg.yaml:2: policy contraction must be between 0", nil},
		{"9 numbers", "overflowing scale", test("--tolerances", bigScale), 2, "scale.yaml:3: scale must be between 0", nil},
	}
	for _, f := range []struct{ flag, value string }{
		{"--temperature", "NaN"}, {"--temperature", "Inf"}, {"--temperature", "-1"},
		{"--top-p", "NaN"}, {"--top-p", "-1"}, {"--top-p", "1.5"}, {"--steps", "-1"},
	} {
		out = append(out, attack{"9 numbers", f.flag + " " + f.value, append(append([]string{}, run...), f.flag, f.value), 1, f.flag + " .*must be", nil})
	}
	out = append(out,
		attack{"9 numbers", "--keep 0", []string{"carve", "--keep", "0", "-o", filepath.Join(tmp, "k0")}, 1, "--keep 0: must be", nil},
		attack{"9 numbers", "--weight-cache-mb -1", []string{"serve", "--weight-cache-mb", "-1"}, 1, "--weight-cache-mb -1: must be", nil},
		attack{"9 numbers", "--max-sessions 0", []string{"serve", "--max-sessions", "0"}, 1, "--max-sessions 0: must be", nil},
		// 10. Sizes from headers: runs in small memory, with the text of
		// the real model (the patched seq_len is the only change).
		attack{"10 header sizes", "seq_len 2^21, --steps 8", append([]string{"run", bigSeq}, run[2:]...), 0, `\A(tapmlc: (weights|prompt|decode|kernels)[^\n]*\n)*\z`, nil},
		attack{"10 header sizes", "carve of seq_len 2^21, --steps 8", []string{"carve", bigSeq, "--tokenizer", tok, "--steps", "8", "-o", filepath.Join(tmp, "seq-bundle")}, 0, "", nil},
		attack{"10 header sizes", "migrate of seq_len 2^21, --steps 4", []string{"migrate", bigSeq, "--tokenizer", tok, "--steps", "4", "--target", "cpu"}, 0, "", nil},
		// 11. Small.
		attack{"11 small", "ONNX graph without outputs", []string{"run", noOutputs}, 1, "noout.onnx: the graph has no outputs", nil},
		attack{"11 small", "manifest version 2.5", []string{"test", damaged("v15-bundle", replace("\nversion: 4\n", "\nversion: 2.5\n")), "--target", "cpu"}, 2, "format version 2.5 is not a whole number", nil},
		attack{"11 small", "10 MB pass name", []string{"compile", "--pipeline", longName, "-o", filepath.Join(tmp, "b4")}, 1, "long.yaml: 10485773 bytes, more than the 1048576", nil},
	)
	return out
}

// TestHostileInputs replays every class and reports the table; all counts
// but the attacks must be 0.
func TestHostileInputs(t *testing.T) {
	tmp := t.TempDir()
	var tb table
	fail := func(a attack, v verdict) {
		tb.add(a.class, v)
		if v.crash || v.hang || v.wrongExit || v.lost {
			t.Errorf("%s: %s: %s", a.class, a.name, v.detail)
		}
	}
	for _, a := range fileAttacks(t, tmp) {
		fail(a, runAttack(t, a))
	}
	for _, a := range atomicAttacks(t, tmp) {
		fail(a.attack, a.verdict())
	}
	for _, a := range serverAttacks(t) {
		fail(a.attack, a.verdict())
	}
	t.Logf("hostile inputs:\n%s", tb.String())
}

// judged is an attack judged by its own function (killing a writer,
// talking to the server) rather than by one command's exit.
type judged struct {
	attack
	verdict func() verdict
}

// atomicAttacks kill a carve that replaces an existing bundle at several
// moments: the folder must always hold a complete bundle (the old or the
// new), and the next run must clean what the killed ones left.
func atomicAttacks(t *testing.T, tmp string) []judged {
	dir := models(t)
	out := filepath.Join(tmp, "replaced")
	if r := tapmlc(t, "carve", "--steps", "4", "-o", out); r.code != 0 {
		t.Fatalf("carve: %s", r.stderr)
	}
	args := []string{"carve", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"), "--prompt", "Once", "--steps", "12", "-o", out}
	var as []judged
	for _, after := range []time.Duration{5, 20, 60, 120, 250, 500} {
		after *= time.Millisecond
		as = append(as, judged{attack{class: "8 atomic replacement", name: fmt.Sprintf("carve killed after %s", after)}, func() verdict {
			cmd := exec.Command(binary_, args...)
			if err := cmd.Start(); err != nil {
				return verdict{crash: true, detail: err.Error()}
			}
			time.Sleep(after)
			cmd.Process.Kill()
			cmd.Wait()
			if b, err := carve.Open(out); err != nil {
				return verdict{lost: true, detail: fmt.Sprintf("after a kill at %s the folder is not a bundle: %v", after, err)}
			} else {
				b.Close()
			}
			return verdict{}
		}})
	}
	as = append(as, judged{attack{class: "8 atomic replacement", name: "the next run cleans leftovers"}, func() verdict {
		if r := tapmlc(t, "carve", "--steps", "4", "-o", out); r.code != 0 {
			return verdict{wrongExit: true, detail: r.stderr}
		}
		entries, _ := os.ReadDir(tmp)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".replaced.") {
				return verdict{lost: true, detail: "leftover " + e.Name()}
			}
		}
		return verdict{}
	}})
	return as
}

// serverAttacks are classes 1 to 5: frames and connections against a
// running `tapmlc serve`. After each, a legitimate remote run must print
// the CPU's text.
func serverAttacks(t *testing.T) []judged {
	dir := models(t)
	s := serve(t, nil, "--max-conns", "24", "--max-sessions", "2")
	runArgs := func(target string) []string {
		return []string{"run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
			"--steps", "24", "--temperature", "0", "--target", target}
	}
	cpuText := tapmlc(t, runArgs("cpu")...).stdout
	// legitOn checks that after an attack a legitimate run on the server
	// at url prints the CPU's text.
	legitOn := func(url string, v verdict) verdict {
		if v.crash || v.hang {
			return v
		}
		r := tapmlc(t, runArgs("remote:"+url)...)
		if r.code != 0 || r.stdout != cpuText {
			v.crash = true
			v.detail += fmt.Sprintf(" then a legitimate remote run: exit %d, %q: %s", r.code, r.stdout, r.stderr)
		}
		return v
	}
	legit := func(v verdict) verdict { return legitOn(s.url, v) }
	ctx := context.Background()
	dialTo := func(url string) (*websocket.Conn, error) {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err == nil {
			c.SetReadLimit(rproto.MaxFrame)
		}
		return c, err
	}
	dialRaw := func() (*websocket.Conn, error) { return dialTo(s.url) }
	// roundTripTo sends frames to the server at url after a hello and
	// returns the last reply.
	roundTripTo := func(url string, frames ...[]byte) (rproto.Msg, error) {
		c, err := dialTo(url)
		if err != nil {
			return nil, err
		}
		defer c.CloseNow()
		var m rproto.Msg
		for _, f := range append([][]byte{rproto.Encode(1, &rproto.Hello{Version: rproto.Version, Client: "attacker"})}, frames...) {
			rctx, cancel := context.WithTimeout(ctx, attackTimeout)
			err := c.Write(rctx, websocket.MessageBinary, f)
			var b []byte
			if err == nil {
				_, b, err = c.Read(rctx)
			}
			cancel()
			if err != nil {
				return m, err
			}
			if _, m, err = rproto.Decode(b); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	roundTrip := func(frames ...[]byte) (rproto.Msg, error) { return roundTripTo(s.url, frames...) }
	wantError := func(want string) func(rproto.Msg, error) verdict {
		return func(m rproto.Msg, err error) verdict {
			if e, ok := m.(*rproto.Error); !ok || !strings.Contains(e.Message, want) {
				return verdict{wrongExit: true, detail: fmt.Sprintf("reply %+v, %v; want an error with %q", m, err, want)}
			}
			return verdict{}
		}
	}
	compile := func(src, entry string) []byte {
		return rproto.Encode(2, &rproto.Compile{Kernel: 1, Node: 3, Op: "evil", Language: "wgsl", Entry: entry, Source: []byte(src), Workgroup: [3]uint32{1, 1, 1}})
	}
	frameAttack := func(class, name string, want string, frames ...[]byte) judged {
		return judged{attack{class: class, name: name}, func() verdict { return legit(wantError(want)(roundTrip(frames...))) }}
	}
	// The same against a `serve --vulkan` server (tapml's own Vulkan
	// device: its kernels are translated to SPIR-V and checked by
	// runtime/vulkan before the driver sees them).
	vk := serve(t, nil, "--vulkan", "--max-sessions", "1")
	vulkanAttack := func(name string, want string, frames ...[]byte) judged {
		return judged{attack{class: "1 kernels", name: name + " (serve --vulkan)"}, func() verdict {
			return legitOn(vk.url, wantError(want)(roundTripTo(vk.url, frames...)))
		}}
	}
	f32 := func(n int) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(i)))
		}
		return b
	}
	// Sessions over the cap wait, then are refused; the server goes on.
	maxSessions := judged{attack{class: "4 memory", name: "more sessions than --max-sessions"}, func() verdict {
		var held []*websocket.Conn
		defer func() {
			for _, c := range held {
				c.CloseNow()
			}
		}()
		for i := 0; i < 2; i++ {
			c, err := dialRaw()
			if err != nil {
				return verdict{wrongExit: true, detail: err.Error()}
			}
			held = append(held, c)
			c.Write(ctx, websocket.MessageBinary, rproto.Encode(1, &rproto.Hello{Version: rproto.Version}))
			c.Read(ctx)
		}
		v := wantError("its limit (--max-sessions)")(roundTrip())
		for _, c := range held {
			c.CloseNow()
		}
		held = nil
		time.Sleep(200 * time.Millisecond)
		return legit(v)
	}}
	as := []judged{
		frameAttack("1 kernels", "invalid UTF-8 WGSL", "invalid UTF-8", compile("fn main() {} \xff\xfe", "main")),
		frameAttack("1 kernels", "invalid UTF-8 entry point", "not a WGSL identifier", compile("fn main() {}", "ma\xffin")),
		frameAttack("1 kernels", "4000 nested parentheses", "nesting deeper than", compile("fn main() { let x = "+strings.Repeat("(", 4000)+"1"+strings.Repeat(")", 4000)+"; }", "main")),
		frameAttack("1 kernels", "NUL in the source", "unexpected character", compile("fn main() {}\x00", "main")),
		frameAttack("1 kernels", "f16 on a device without shader-f16", "has no shader-f16", compile("enable f16;\n@compute @workgroup_size(1)\nfn main() {}\n", "main")),
		vulkanAttack("invalid UTF-8 WGSL", "invalid UTF-8", compile("fn main() {} \xff\xfe", "main")),
		vulkanAttack("kernel without bindings", "binds 0 storage buffers",
			rproto.Encode(2, &rproto.Compile{Kernel: 1, Node: 3, Op: "probe", Language: "wgsl", Entry: "main",
				Source: []byte("@compute @workgroup_size(1)\nfn main() {}\n"), Workgroup: [3]uint32{1, 1, 1}})),
		// 2. Leaks: a session uploads values; the next reads a buffer it
		// never wrote and must see zeros, and cannot name the other's ids.
		{attack{class: "2 cross-session data", name: "read another session's upload"}, func() verdict {
			if _, err := roundTrip(rproto.Encode(2, &rproto.Upload{Buf: 1, DType: rproto.F32, Shape: []uint32{512}, Data: f32(512)})); err != nil {
				return verdict{wrongExit: true, detail: err.Error()}
			}
			m, err := roundTrip(rproto.Encode(2, &rproto.Download{Buf: 1, Length: 2048}))
			v := wantError("does not exist")(m, err)
			if d, ok := m.(*rproto.Data); ok && bytes.Equal(d.Data, f32(512)) {
				v = verdict{lost: true, detail: "a new session read the previous session's upload"}
			}
			return legit(v)
		}},
		// 3. DNS rebinding.
		{attack{class: "3 DNS rebinding", name: "Host: attacker.example"}, func() verdict {
			req, _ := http.NewRequest("GET", "http"+strings.TrimPrefix(s.url, "ws")+"/", nil)
			req.Host = "attacker.example"
			req.Header.Set("Origin", "http://attacker.example")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return verdict{wrongExit: true, detail: err.Error()}
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMisdirectedRequest {
				return legit(verdict{lost: true, detail: "a rebound Host was served: " + resp.Status})
			}
			return legit(verdict{})
		}},
		// 4. Memory.
		{attack{class: "4 memory", name: "60 unauthenticated 1 MiB handshakes"}, func() verdict {
			for i := 0; i < 60; i++ {
				c, err := dialRaw()
				if err != nil {
					continue // over --max-conns: refused, as it should be
				}
				c.Write(ctx, websocket.MessageBinary, make([]byte, 1<<20))
				c.CloseNow()
			}
			return legit(verdict{})
		}},
		// Refused by the device's max buffer size (native devices report it
		// now) or by the memory budget, both naming the 16 GiB.
		frameAttack("4 memory", "upload declaring 16 GiB, 100 bytes sent", "17179869184 bytes",
			rproto.Encode(2, &rproto.Upload{Buf: 1, DType: rproto.F32, Shape: []uint32{1 << 16, 1 << 16}, Data: make([]byte, 100)})),
		{attack{class: "4 memory", name: "six 100-byte uploads of 1 GiB tensors"}, func() verdict {
			var frames [][]byte
			for i := range uint32(6) {
				frames = append(frames, rproto.Encode(2+i, &rproto.Upload{Buf: 1 + i, DType: rproto.F32, Shape: []uint32{1 << 28}, Data: make([]byte, 100)}))
			}
			m, err := roundTrip(frames...)
			if err != nil || m.Type() == rproto.TError {
				return legit(verdict{wrongExit: true, detail: fmt.Sprintf("%+v %v", m, err)})
			}
			return legit(verdict{})
		}},
		maxSessions,
		// 5. Host side: a server of another protocol version.
		{attack{class: "5 host side", name: "server with another version"}, func() verdict {
			fake := fakeServer(t, func(c *websocket.Conn, id uint32) {
				c.Write(ctx, websocket.MessageBinary, rproto.Encode(id, &rproto.HelloOK{Version: rproto.Version + 1}))
			})
			r := tapmlc(t, runArgs("remote:"+fake)...)
			if r.code != 1 || !strings.Contains(r.stderr, "protocol version mismatch") {
				return verdict{wrongExit: true, detail: r.stderr}
			}
			return verdict{}
		}},
		{attack{class: "5 host side", name: "server text with escape sequences"}, func() verdict {
			fake := fakeServer(t, func(c *websocket.Conn, id uint32) {
				c.Write(ctx, websocket.MessageBinary, rproto.Encode(id, rproto.Errorf(rproto.CodeFailed, "\x1b[2J\x1b]0;owned\x07 gone")))
			})
			r := tapmlc(t, runArgs("remote:"+fake)...)
			if r.code != 1 || strings.Contains(r.stderr, "\x1b") || !strings.Contains(r.stderr, `\x1b[2J`) {
				return verdict{wrongExit: true, detail: fmt.Sprintf("%q", r.stderr)}
			}
			return verdict{}
		}},
		{attack{class: "5 host side", name: "server killed during test"}, func() verdict { return serverDiesDuringTest(t) }},
	}
	return as
}

// fakeServer answers each connection's hello with reply; it returns its
// ws:// URL.
func fakeServer(t *testing.T, reply func(c *websocket.Conn, id uint32)) string {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		_, b, err := c.Read(r.Context())
		if err != nil {
			return
		}
		reply(c, rproto.PeekID(b))
		c.Close(websocket.StatusNormalClosure, "")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "ws://" + ln.Addr().String()
}

// serverDiesDuringTest kills the server while `tapmlc test` replays a
// bundle on it: the run stops with one error, not a table of failures.
func serverDiesDuringTest(t *testing.T) verdict {
	s := serve(t, nil)
	cmd := exec.Command(binary_, "test", carvedBundle(t), "--target", "remote:"+s.url)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return verdict{crash: true, detail: err.Error()}
	}
	// Kill it once the host is connected and replaying.
	for start := time.Now(); !strings.Contains(s.stderr(), "connected (worker") && time.Since(start) < attackTimeout; {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	s.cmd.Process.Kill()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(attackTimeout):
		cmd.Process.Kill()
		return verdict{hang: true, detail: "test went on after the server died"}
	}
	lines := strings.Count(errb.String(), "tapmlc test: ")
	switch {
	case cmd.ProcessState.ExitCode() == 0:
		t.Log("server killed during test: the test finished before the kill; nothing was checked")
		return verdict{}
	case cmd.ProcessState.ExitCode() != 0 && (cmd.ProcessState.ExitCode() != 2 || lines != 1 || !strings.Contains(errb.String(), "connection lost") || strings.Contains(out.String(), "FAIL")):
		return verdict{wrongExit: true, detail: fmt.Sprintf("exit %d, stdout %.300q, stderr %.300q", cmd.ProcessState.ExitCode(), out.String(), errb.String())}
	}
	t.Logf("server killed during test: %s", lastLine(errb.String()))
	return verdict{}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
