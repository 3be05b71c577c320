package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fatalTB records the message of the first Fatal/Fatalf and stops the
// goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()                   {}
func (f *fatalTB) Fatal(args ...any)         { f.msg = fmt.Sprint(args...); panic(f) }
func (f *fatalTB) Fatalf(s string, a ...any) { f.msg = fmt.Sprintf(s, a...); panic(f) }

// fails runs fn with a fatalTB and returns its failure message ("" if none).
func fails(t *testing.T, fn func(testing.TB)) (msg string) {
	f := &fatalTB{TB: t}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		msg = f.msg
	}()
	fn(f)
	return ""
}

func TestRoot(t *testing.T) {
	root := Root(t)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("../.."); root != want {
		t.Errorf("Root = %s, want %s", root, want)
	}
}

func TestModelsOverride(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.bin"), []byte("x"), 0o644)
	t.Setenv("TAPML_MODELS", dir)
	if got := Models(t); got != dir {
		t.Errorf("Models = %s, want %s", got, dir)
	}
	if got := Model(t, "m.bin"); got != filepath.Join(dir, "m.bin") {
		t.Errorf("Model = %s", got)
	}
	if msg := fails(t, func(tb testing.TB) { Model(tb, "absent.bin") }); !strings.Contains(msg, "absent.bin is missing") {
		t.Errorf("missing model: %q", msg)
	}
	t.Setenv("TAPML_MODELS", filepath.Join(dir, "nowhere"))
	if msg := fails(t, func(tb testing.TB) { Models(tb) }); !strings.Contains(msg, "shared test models are missing") {
		t.Errorf("missing folder: %q", msg)
	}
}

func TestSharedModels(t *testing.T) {
	for _, name := range []string{"stories260K.bin", "tok512.bin"} {
		Model(t, name)
	}
}

func TestToolAndInstalled(t *testing.T) {
	if p := Tool(t, "go"); !filepath.IsAbs(p) {
		t.Errorf("Tool(go) = %s", p)
	}
	if msg := fails(t, func(tb testing.TB) { Tool(tb, "tapml-no-such-tool") }); msg != "testenv: tapml-no-such-tool is not installed: run scripts/setup.sh" {
		t.Errorf("missing tool: %q", msg)
	}
	if p := Installed(t, "go.mod"); p != filepath.Join(Root(t), "go.mod") {
		t.Errorf("Installed(go.mod) = %s", p)
	}
	if msg := fails(t, func(tb testing.TB) { Installed(tb, "/nonexistent/tapml") }); !strings.Contains(msg, "/nonexistent/tapml is not installed: run scripts/setup.sh") {
		t.Errorf("missing install: %q", msg)
	}
}
