package llvm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
)

// clangFlags are the flags every module is compiled with (after the input).
var clangFlags = []string{"-O3", "-march=native", "-fPIC", "-shared"}

// ClangError is clang's failure to compile a module: its diagnostics.
type ClangError struct {
	Output string
	Err    error
}

func (e *ClangError) Error() string {
	msg := strings.TrimSpace(e.Output)
	if msg == "" {
		msg = e.Err.Error()
	}
	return "clang: " + msg
}

func (e *ClangError) Unwrap() error { return e.Err }

// compiler turns LLVM IR text into shared objects, caching them on disk
// under a hash of the text, the flags, clang's version and the host CPU.
type compiler struct {
	clang string
	dir   string

	once sync.Once
	salt string // clang version and CPU, part of every cache key
	err  error
}

// findClang returns the clang to use: name when given, else $TAPML_CLANG,
// else clang-14 or clang from PATH.
func findClang(name string) (string, error) {
	if name == "" {
		name = os.Getenv("TAPML_CLANG")
	}
	if name != "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("clang %q: %w", name, err)
		}
		return p, nil
	}
	for _, n := range []string{"clang-14", "clang"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no clang-14 (or clang) in PATH; install clang-14 (apt-get install clang-14 llvm-14) or set TAPML_CLANG")
}

func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "tapml", "llvm")
	}
	return filepath.Join(os.TempDir(), "tapml-llvm")
}

func (c *compiler) init() error {
	c.once.Do(func() {
		out, err := exec.Command(c.clang, "--version").Output()
		if err != nil {
			c.err = fmt.Errorf("%s --version: %w", c.clang, err)
			return
		}
		first, _, _ := strings.Cut(string(out), "\n")
		c.salt = first + "\n" + hostCPU() + "\n" + goruntime.GOOS + "/" + goruntime.GOARCH
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			c.err = fmt.Errorf("kernel cache: %w", err)
		}
	})
	return c.err
}

// hostCPU describes the CPU that -march=native targets (Linux: the model
// name and feature flags of /proc/cpuinfo).
func hostCPU() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	var model, flags string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		case "flags", "Features":
			if flags == "" {
				flags = strings.TrimSpace(v)
			}
		}
	}
	return model + "|" + flags
}

// key returns the cache key of a module's text.
func (c *compiler) key(src []byte) string {
	h := sha256.New()
	h.Write([]byte(c.salt))
	h.Write([]byte(strings.Join(clangFlags, " ")))
	h.Write([]byte{0})
	h.Write(src)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// build returns the path of the shared object of src, compiling it unless
// the cache has it.
func (c *compiler) build(src []byte) (path string, cached bool, err error) {
	if err := c.init(); err != nil {
		return "", false, err
	}
	path = filepath.Join(c.dir, c.key(src)+".so")
	if _, err := os.Stat(path); err == nil {
		return path, true, nil
	}
	tmp, err := os.MkdirTemp(c.dir, "build-")
	if err != nil {
		return "", false, fmt.Errorf("kernel cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	ll := filepath.Join(tmp, "k.ll")
	so := filepath.Join(tmp, "k.so")
	if err := os.WriteFile(ll, src, 0o644); err != nil {
		return "", false, fmt.Errorf("kernel cache: %w", err)
	}
	if err := c.run(ll, so); err != nil {
		return "", false, err
	}
	// rename is atomic: a concurrent process sees the old file or the new one
	if err := os.Rename(so, path); err != nil {
		return "", false, fmt.Errorf("kernel cache: %w", err)
	}
	return path, false, nil
}

func (c *compiler) run(ll, so string) error {
	args := append([]string{ll, "-o", so}, clangFlags...)
	args = append(args, "-lm")
	cmd := exec.Command(c.clang, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &ClangError{Output: out.String(), Err: err}
	}
	return nil
}

// check compiles src without optimising or linking, to find which kernel
// of a failed module is at fault.
func (c *compiler) check(src []byte) error {
	tmp, err := os.MkdirTemp("", "tapml-llvm-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ll := filepath.Join(tmp, "k.ll")
	if err := os.WriteFile(ll, src, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(c.clang, "-O0", "-c", ll, "-o", filepath.Join(tmp, "k.o"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &ClangError{Output: out.String(), Err: err}
	}
	return nil
}
