package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/gguf"
	"github.com/tapml/tapml/frontend/llama2c"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor/safetensors"
)

// Quantized models keep their blocks on every target: the tests write
// GGUF files with ggml's formats (tensor/quant's encoders, ggml's own
// bits) from the trained stories260K (whose rows of 64 are whole Q4_0 and
// Q8_0 blocks; its 172-wide rows stay F32) and from a model of 256-wide
// rows for Q4_K.

// storiesGGUF writes stories260K with matrices of type typ.
func storiesGGUF(t *testing.T, typ gguf.GGMLType) string {
	t.Helper()
	ck, err := llama2c.Open(filepath.Join(models(t), "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	p := filepath.Join(t.TempDir(), "stories260K-"+typ.String()+".gguf")
	if err := gguf.WriteLlama(p, ck.Header.Config(), ck.Weights(), typ); err != nil {
		t.Fatal(err)
	}
	return p
}

// wideGGUF writes a random model of 256-wide rows (whole K-format
// super-blocks) with matrices of type typ. Its weights are 3x the usual
// random scale, so that its next-token distributions are peaked and
// greedy decoding has margins far above f32 rounding, and its classifier
// never picks BOS (a zero row: some other logit is positive), which ends
// generation.
func wideGGUF(t *testing.T, typ gguf.GGMLType) string {
	t.Helper()
	c := llama.Config{Dim: 256, HiddenDim: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 300, MaxSeq: 64,
		NormEps: 1e-5, RopeTheta: 10000, RopeStyle: "interleaved"}
	r := rand.New(rand.NewPCG(9, 9))
	w := arch.RandomWeights(c.WeightShapes(), func(ns arch.NamedShape) func() float64 {
		if len(ns.Shape) == 1 {
			return arch.Constant(1)
		}
		return arch.Symmetric(r, 3/float64(ns.Shape[1])*16)
	})
	out, _ := w["output"].Bytes()
	out = append([]byte(nil), out...)
	clear(out[4*c.Dim : 8*c.Dim]) // row 1, BOS
	w["output"] = ir.BytesSource(out)
	p := filepath.Join(t.TempDir(), "wide-"+typ.String()+".gguf")
	if err := gguf.WriteLlama(p, c, w, typ); err != nil {
		t.Fatal(err)
	}
	return p
}

// modelWeightBytes is the size of a GGUF file's tensor data, and of that
// data by IR dtype.
func modelWeightBytes(t *testing.T, path string) (total int64, byType map[string]int64) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byType = map[string]int64{}
	for _, ti := range f.Tensors {
		total += ti.Size
		byType[strings.ToLower(ti.Type.String())] += ti.Size
	}
	return total, byType
}

var weightsLine = regexp.MustCompile(`weights on \S+: \S+ MiB \((\d+) bytes;`)
var buffersLine = regexp.MustCompile(`device buffers: .* \((\d+) bytes\)`)

// TestQuantizedGGUFOnTargets: a Q4_0, Q8_0 and Q4_K GGUF print the CPU
// reference's text on webgpu, vulkan, llvm and a remote device, and `run
// -v` shows that the device holds the file's own weight bytes (its
// blocks), within 1.2x for the buffer pool's size classes, plus the KV
// cache and activations.
func TestQuantizedGGUFOnTargets(t *testing.T) {
	srv := serve(t, nil)
	for _, tc := range []struct {
		typ  gguf.GGMLType
		path func(*testing.T, gguf.GGMLType) string
	}{{gguf.GGMLQ4_0, storiesGGUF}, {gguf.GGMLQ8_0, storiesGGUF}, {gguf.GGMLQ4_K, wideGGUF}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			p := tc.path(t, tc.typ)
			run := func(target string, extra ...string) result {
				r := tapmlc(t, append([]string{"run", p, "--steps", "40", "--temperature", "0", "--prompt", "w260 w261", "--target", target}, extra...)...)
				if r.code != 0 {
					t.Fatalf("%s: exit %d: %s", target, r.code, r.stderr)
				}
				return r
			}
			want := run("cpu").stdout
			if len(want) < 40 {
				t.Fatalf("the reference's text %q is too short to compare", want)
			}
			for _, target := range []string{"webgpu", "vulkan", "llvm", "remote:" + srv.url} {
				if got := run(target).stdout; got != want {
					t.Errorf("%s:\ngot  %q\nwant %q", target, got, want)
				}
			}
			r := run("webgpu", "-v")
			total, byType := modelWeightBytes(t, p)
			m := weightsLine.FindStringSubmatch(r.stderr)
			if m == nil || m[1] != strconv.FormatInt(total, 10) || !strings.Contains(r.stderr, strings.ToLower(tc.typ.String())+" ") {
				t.Fatalf("run -v: %q, want the file's %d weight bytes, of which %d in %s", r.stderr, total, byType[strings.ToLower(tc.typ.String())], tc.typ)
			}
			b := buffersLine.FindStringSubmatch(r.stderr)
			peak, _ := strconv.ParseInt(b[1], 10, 64)
			if limit := total*12/10 + 4<<20; b == nil || peak > limit {
				t.Errorf("device buffers peak at %d bytes, more than 1.2x the %d weight bytes + 4 MiB for the KV cache and activations", peak, total)
			}
		})
	}
}

// TestQuantizedCarve: the bundle of a Q4_0 model holds the weights its
// cases read once each, in their blocks (no larger than the model's
// weights), and its cases pass on every target with the kernels the
// device runs.
func TestQuantizedCarve(t *testing.T) {
	p := storiesGGUF(t, gguf.GGMLQ4_0)
	bundle := filepath.Join(t.TempDir(), "tests")
	r := tapmlc(t, "carve", p, "--prompt", "w260 w261", "--steps", "8", "-o", bundle)
	if r.code != 0 {
		t.Fatalf("carve: exit %d: %s", r.code, r.stderr)
	}
	total, _ := modelWeightBytes(t, p)
	f, err := safetensors.Open(filepath.Join(bundle, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stored, blocks int64
	for _, in := range f.Infos() {
		stored += in.Size()
		if in.DType == ir.Q4_0 {
			blocks += in.Size()
		}
	}
	st, _ := os.Stat(filepath.Join(bundle, "weights.safetensors"))
	gf, _ := os.Stat(p)
	if blocks == 0 || stored > total || st.Size() > gf.Size() {
		t.Errorf("bundle weights: %d bytes (%d of them q4_0 blocks) in a %d-byte file; the model's weights are %d bytes in a %d-byte file",
			stored, blocks, st.Size(), total, gf.Size())
	}
	srv := serve(t, nil)
	for _, target := range []string{"webgpu", "vulkan", "llvm", "remote:" + srv.url} {
		if r := tapmlc(t, "test", bundle, "--target", target); r.code != 0 || !strings.Contains(r.stdout, " 0 failed") {
			t.Errorf("test on %s: exit %d\n%s\n%s", target, r.code, r.stdout, r.stderr)
		}
	}
	// A build folder keeps the blocks too, and runs as the file does.
	build := filepath.Join(t.TempDir(), "build")
	if r := tapmlc(t, "compile", p, "--target", "webgpu", "-o", build); r.code != 0 {
		t.Fatalf("compile: exit %d: %s", r.code, r.stderr)
	}
	args := []string{"--steps", "16", "--temperature", "0", "--prompt", "w260 w261"}
	want := tapmlc(t, append([]string{"run", p}, args...)...)
	if got := tapmlc(t, append([]string{"run", build, "--target", "webgpu"}, args...)...); got.code != 0 || got.stdout != want.stdout {
		t.Errorf("the build folder on webgpu: exit %d\ngot  %q\nwant %q\n%s", got.code, got.stdout, want.stdout, got.stderr)
	}
}

// TestQuantizeOnLoad: --quantize re-encodes an f32 model's matrices; the
// targets print the CPU reference's text of the quantized model.
func TestQuantizeOnLoad(t *testing.T) {
	dir := models(t)
	args := []string{"run", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin"),
		"--steps", "64", "--temperature", "0", "--quantize", "q4f16_1"}
	ref := tapmlc(t, append(args, "--target", "cpu")...)
	if ref.code != 0 || !strings.Contains(ref.stderr, "weights to q4_0") || !strings.Contains(ref.stderr, "compute stays f32") {
		t.Fatalf("cpu: exit %d: %s", ref.code, ref.stderr)
	}
	if plain := golden(t, "stories260K_greedy.golden"); ref.stdout == plain[:min(len(plain), len(ref.stdout))] {
		t.Errorf("Q4_0 weights gave the f32 model's text %q", ref.stdout)
	}
	for _, target := range []string{"webgpu", "llvm"} {
		if r := tapmlc(t, append(args, "--target", target)...); r.code != 0 || r.stdout != ref.stdout {
			t.Errorf("%s: exit %d\ngot  %q\nwant %q\n%s", target, r.code, r.stdout, ref.stdout, r.stderr)
		}
	}
	if r := tapmlc(t, append(args[:len(args)-1], "Q3_K")...); r.code == 0 || !strings.Contains(r.stderr, `unknown quantization "Q3_K"`) {
		t.Errorf("--quantize Q3_K: exit %d: %s", r.code, r.stderr)
	}
}
