package migrate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/runtime/webgpu"
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

func openWebGPU(t testing.TB) *webgpu.Device {
	t.Helper()
	d, err := webgpu.Open(webgpu.Options{})
	if err != nil {
		if os.Getenv("TAPML_REQUIRE_WEBGPU") != "" {
			t.Fatalf("webgpu: %v", err)
		}
		t.Skipf("webgpu: no device: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

const storiesPrompt = "Once upon a time"
