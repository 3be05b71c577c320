// Package browser serves tapml's browser device: a page whose Go program
// (the package in ./wasm, built for GOOS=js GOARCH=wasm over
// cogentcore/webgpu) attaches to `tapmlc serve --browser` over WebSocket and
// runs the kernels hosts send on the browser's WebGPU.
//
// The program is not committed: Build compiles it with the local Go
// toolchain from the tapml source tree (found by walking up from the
// working folder, then from the tapmlc binary's folder) into a cache folder
// ($XDG_CACHE_HOME/tapml/browser by default), keyed by a hash of the Go
// version and of every Go source of the module, so it is rebuilt only when
// the code changes. Elsewhere, build it once with
//
//	GOOS=js GOARCH=wasm go build -o device.wasm github.com/tapml/tapml/runtime/remote/browser/wasm
//
// and pass it with --wasm (wasm_exec.js must come from the same Go
// version: $(go env GOROOT)/lib/wasm/wasm_exec.js, found next to the .wasm
// file or in GOROOT).
package browser

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed index.html
var indexHTML []byte

// Package is the import path of the browser device program.
const Package = "github.com/tapml/tapml/runtime/remote/browser/wasm"

const module = "github.com/tapml/tapml"

// Program is a built browser device program and the wasm_exec.js of the Go
// that built it.
type Program struct {
	Wasm     string
	WasmExec string
}

// Handler serves the page: / (the page), /wasm_exec.js and /device.wasm.
func (p *Program) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		switch r.URL.Path {
		case "/", "/index.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(indexHTML)
		case "/wasm_exec.js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			http.ServeFile(w, r, p.WasmExec)
		case "/device.wasm":
			w.Header().Set("Content-Type", "application/wasm")
			http.ServeFile(w, r, p.Wasm)
		default:
			http.NotFound(w, r)
		}
	})
}

// Prebuilt returns the program of a .wasm file built elsewhere, with the
// wasm_exec.js next to it or else the local Go's.
func Prebuilt(wasm string) (*Program, error) {
	if _, err := os.Stat(wasm); err != nil {
		return nil, fmt.Errorf("--wasm: %w", err)
	}
	exec := filepath.Join(filepath.Dir(wasm), "wasm_exec.js")
	if _, err := os.Stat(exec); err != nil {
		goBin, err := goTool()
		if err != nil {
			return nil, fmt.Errorf("no wasm_exec.js next to %s and %v", wasm, err)
		}
		if exec, err = wasmExec(context.Background(), goBin); err != nil {
			return nil, err
		}
	}
	return &Program{Wasm: wasm, WasmExec: exec}, nil
}

// ModuleRoot finds the tapml source tree: the folder of a go.mod declaring
// the module, above the working folder or the running binary.
func ModuleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declares(b, module) {
				return dir, nil
			}
			up := filepath.Dir(dir)
			if up == dir {
				break
			}
			dir = up
		}
	}
	return "", fmt.Errorf("the tapml source tree (a go.mod of module %s) is not above the working folder or the tapmlc binary; "+
		"build the browser device with `GOOS=js GOARCH=wasm go build -o device.wasm %s` and pass --wasm device.wasm", module, Package)
}

func declares(gomod []byte, mod string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == mod {
			return true
		}
	}
	return false
}

func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, p := range []string{filepath.Join(os.Getenv("GOROOT"), "bin", "go"), "/usr/local/go/bin/go"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("no Go toolchain (go) on PATH to build the browser device")
}

func goOutput(ctx context.Context, goBin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// wasmExec finds the wasm_exec.js of a Go toolchain.
func wasmExec(ctx context.Context, goBin string) (string, error) {
	root, err := goOutput(ctx, goBin, "env", "GOROOT")
	if err != nil {
		return "", err
	}
	for _, p := range []string{filepath.Join(root, "lib", "wasm", "wasm_exec.js"), filepath.Join(root, "misc", "wasm", "wasm_exec.js")} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no wasm_exec.js in the Go installation at %s", root)
}

// sourceKey hashes the Go version and the module's Go sources, go.mod and
// go.sum (tests, testdata and hidden folders aside).
func sourceKey(root, goVersion string) (string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || name == "go.mod" || name == "go.sum" || name == "index.html" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", goVersion, os.Getenv("GOFLAGS"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// DefaultCacheDir is where Build keeps programs.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "tapml", "browser")
}

// Build compiles the browser device program from the tapml source tree
// into cacheDir ("" for DefaultCacheDir), unless a build of the same
// sources is there. Progress goes to log.
func Build(ctx context.Context, cacheDir string, log io.Writer) (*Program, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	goBin, err := goTool()
	if err != nil {
		return nil, err
	}
	version, err := goOutput(ctx, goBin, "version")
	if err != nil {
		return nil, err
	}
	key, err := sourceKey(root, version)
	if err != nil {
		return nil, fmt.Errorf("hashing the sources under %s: %w", root, err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	p := &Program{Wasm: filepath.Join(cacheDir, "device-"+key+".wasm"), WasmExec: filepath.Join(cacheDir, "wasm_exec-"+key+".js")}
	if _, err := os.Stat(p.Wasm); err == nil {
		if _, err := os.Stat(p.WasmExec); err == nil {
			fmt.Fprintf(log, "browser device: using %s\n", p.Wasm)
			return p, nil
		}
	}
	js, err := wasmExec(ctx, goBin)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "browser device: building %s for js/wasm with %s into %s\n", Package, version, cacheDir)
	tmp, err := os.CreateTemp(cacheDir, "build-*.wasm")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", tmp.Name(), Package)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the browser device (%s): %v\n%s", Package, err, strings.TrimSpace(errb.String()))
	}
	b, err := os.ReadFile(js)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.WasmExec, b, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), p.Wasm); err != nil {
		return nil, err
	}
	// Older builds of other sources are dropped.
	old, _ := filepath.Glob(filepath.Join(cacheDir, "device-*.wasm"))
	for _, o := range old {
		if o != p.Wasm {
			os.Remove(o)
			os.Remove(filepath.Join(cacheDir, "wasm_exec-"+strings.TrimSuffix(strings.TrimPrefix(filepath.Base(o), "device-"), ".wasm")+".js"))
		}
	}
	return p, nil
}
