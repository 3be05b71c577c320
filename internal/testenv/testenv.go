// Package testenv finds what tapml's tests need outside the repository: the
// shared test models and the tools and data scripts/setup.sh installs.
//
// A missing piece fails the test with a message that says how to get it; it
// never skips. CI (.ci/run) installs everything, so a skip would only hide a
// test that did not run.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// setupHint ends the message of a failure caused by a missing install.
const setupHint = "run scripts/setup.sh"

// Root returns the repository root: the folder holding go.mod, found by
// walking up from the working directory (a test's package folder).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Models returns the folder of shared test models: $TAPML_MODELS when set,
// else ../shared/models beside the repository root.
func Models(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("TAPML_MODELS")
	if dir == "" {
		dir = filepath.Join(Root(t), "..", "shared", "models")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		t.Fatalf("testenv: the shared test models are missing: no folder %s (set TAPML_MODELS to where they are)", abs)
	}
	return abs
}

// Model returns the path of a file (or folder) in the shared test models.
func Model(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Models(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("testenv: test model %s is missing from %s", name, filepath.Dir(p))
	}
	return p
}

// Tool returns the path of an executable on $PATH that scripts/setup.sh
// installs (spirv-val, clang-14, node, ...).
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("testenv: %s is not installed: %s", name, setupHint)
	}
	return p
}

// Installed returns path, a file or folder that scripts/setup.sh installs:
// absolute (a Debian package's data), or relative to the repository root
// (tools/npm/node_modules/...).
func Installed(t testing.TB, path string) string {
	t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(Root(t), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("testenv: %s is not installed: %s", path, setupHint)
	}
	return path
}
