package carve

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tapml/tapml/frontend"
)

// modelsDir returns the shared test models folder, ../shared/models from
// the repository root (the folder holding go.mod), or skips the test.
func modelsDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root not found")
		}
		dir = parent
	}
	models := filepath.Join(dir, "..", "shared", "models")
	if _, err := os.Stat(filepath.Join(models, "stories260K.bin")); err != nil {
		t.Skipf("test models not available: %v", err)
	}
	return models
}

func loadStories(t testing.TB) *frontend.Model {
	t.Helper()
	d := modelsDir(t)
	m, err := frontend.Load(filepath.Join(d, "stories260K.bin"), frontend.Options{Tokenizer: filepath.Join(d, "tok512.bin")})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The stories260K bundle is carved once per test binary and shared (tests
// that modify a bundle copy it first).
var (
	storiesOnce   sync.Once
	storiesBundle string
	storiesRec    *Recording
	storiesBytes  int64
	storiesErr    error
)

const storiesPrompt = "Once upon a time, there was a little girl"
const storiesSteps = 40

func carvedStories(t testing.TB) (dir string, rec *Recording) {
	t.Helper()
	model := loadStories(t)
	storiesOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tapml-carve-test-*")
		if err != nil {
			storiesErr = err
			return
		}
		storiesBundle = filepath.Join(dir, "tests")
		storiesRec, storiesErr = Carve(model.Module, model.Tokenizer, Options{Prompt: storiesPrompt, Steps: storiesSteps})
		if storiesErr != nil {
			return
		}
		storiesBytes, storiesErr = storiesRec.Write(storiesBundle)
	})
	if storiesErr != nil {
		t.Fatal(storiesErr)
	}
	return storiesBundle, storiesRec
}

// copyDir copies a bundle folder so a test can damage it.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
