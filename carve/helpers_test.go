package carve

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/internal/testenv"
)

// writeOpen writes rec as a bundle named name in a temporary folder and
// opens it (closed when the test ends).
func writeOpen(t testing.TB, rec *Recording, name string) *Bundle {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if _, err := rec.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func loadStories(t testing.TB) *frontend.Model {
	t.Helper()
	m, err := frontend.Load(testenv.Model(t, "stories260K.bin"), frontend.Options{Tokenizer: testenv.Model(t, "tok512.bin")})
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
