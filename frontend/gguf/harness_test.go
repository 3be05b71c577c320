package gguf

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tapml/tapml/internal/testenv"
)

// The oracles of this package's GGUF reading are ggml and llama.cpp
// themselves: the prebuilt libraries of npm @node-llama-cpp/linux-*, which
// scripts/setup.sh installs, driven by the C programs in testdata/
// (ggmlquant.c: ggml's quantizers, dequantizers and GGUF writer;
// llamalogits.c: llama.cpp's inference). Tests compile them with clang-14.

var harnesses struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
}

// TestMain removes the folder of the compiled harnesses.
func TestMain(m *testing.M) {
	code := m.Run()
	if harnesses.dir != "" {
		os.RemoveAll(harnesses.dir)
	}
	os.Exit(code)
}

// llamaLibs returns the folder of llama.cpp's prebuilt libraries.
func llamaLibs(t testing.TB) string {
	t.Helper()
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[goruntime.GOARCH]
	return filepath.Dir(testenv.Installed(t,
		fmt.Sprintf("tools/npm/node_modules/@node-llama-cpp/linux-%[1]s/bins/linux-%[1]s/libggml-base.so", arch)))
}

// harness returns the path of testdata/NAME.c compiled against llama.cpp's
// libraries (once per test binary).
func harness(t testing.TB, name string) string {
	t.Helper()
	libs := llamaLibs(t)
	clang := testenv.Tool(t, "clang-14")
	harnesses.mu.Lock()
	defer harnesses.mu.Unlock()
	if bin, ok := harnesses.bins[name]; ok {
		return bin
	}
	if harnesses.dir == "" {
		dir, err := os.MkdirTemp("", "gguf-harness")
		if err != nil {
			t.Fatal(err)
		}
		harnesses.dir, harnesses.bins = dir, map[string]string{}
	}
	bin := filepath.Join(harnesses.dir, name)
	libFiles, _ := filepath.Glob(filepath.Join(libs, "lib*.so"))
	args := []string{"-O1", "-o", bin, filepath.Join("testdata", name+".c")}
	for _, l := range libFiles {
		// The CPU backends (libggml-cpu-*) are loaded at run time.
		if base := filepath.Base(l); base == "libggml-base.so" || strings.HasPrefix(base, "libggml.v") || strings.HasPrefix(base, "libllama.v") {
			args = append(args, l)
		}
	}
	args = append(args, "-Wl,-rpath,"+libs)
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("compiling testdata/%s.c: %v\n%s", name, err, out)
	}
	harnesses.bins[name] = bin
	return bin
}
