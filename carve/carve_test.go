package carve

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tapml/tapml/runtime/cpu"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if storiesBundle != "" {
		os.RemoveAll(filepath.Dir(storiesBundle))
	}
	os.Exit(code)
}

func TestCarveStoriesReplayCPU(t *testing.T) {
	dir, rec := carvedStories(t)
	t.Logf("calls %d, recorded %d, keys %d, kept %d, steps %d, bytes %d", rec.Stats.Calls, rec.Stats.Recorded, rec.Stats.Keys, rec.Stats.Kept, rec.Stats.Steps, storiesBytes)
	t.Logf("ops: %s", OpCounts(rec.Cases))
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Test(cpu.New(), TestOptions{Target: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if !r.Passed() || r.Metrics.MaxAbs != 0 || r.Metrics.ULP != 0 || r.Metrics.Cosine != 1 && r.Metrics.Elements > 0 {
			t.Errorf("case %s: %s, max abs %g, ULP %g, cosine %g, err %s", r.Case, r.Status(), r.Metrics.MaxAbs, r.Metrics.ULP, r.Metrics.Cosine, r.Err)
		}
	}
	t.Log(rep.Summary())
}
