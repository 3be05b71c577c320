package carve

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

func TestDedupKeepsKPerKey(t *testing.T) {
	model, err := frontend.BuiltinTiny()
	if err != nil {
		t.Fatal(err)
	}
	var prev *Recording
	for _, keep := range []int{1, 3} {
		rec, err := Carve(model.Module, model.Tokenizer, Options{Prompt: "hello world", Steps: 24, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		perKey := map[string][]*Case{}
		for _, c := range rec.Cases {
			perKey[c.Key] = append(perKey[c.Key], c)
		}
		kept, full := 0, 0
		for key, cs := range perKey {
			seen := cs[0].Seen
			if want := min(seen, keep); len(cs) != want {
				t.Errorf("keep %d: key %s seen %d times has %d cases, want %d", keep, key, seen, len(cs), want)
			}
			if len(cs) == keep && keep > 1 {
				full++
			}
			for _, c := range cs[1:] {
				if c.Step < cs[0].Step {
					t.Errorf("keep %d: key %s: cases not in run order", keep, key)
				}
			}
			kept += len(cs)
		}
		st := rec.Stats
		if st.Kept != kept || st.Keys != len(perKey) || st.Recorded != st.Calls || st.Calls <= st.Kept {
			t.Errorf("keep %d: stats %+v, counted %d kept over %d keys", keep, st, kept, len(perKey))
		}
		if keep > 1 && full == 0 {
			t.Errorf("keep %d: no key kept %d cases; the test proves nothing", keep, keep)
		}
		if prev != nil && (st.Calls != prev.Stats.Calls || st.Keys != prev.Stats.Keys || st.Kept <= prev.Stats.Kept) {
			t.Errorf("keep %d: stats %+v vs keep 1 %+v", keep, st, prev.Stats)
		}
		// The first case of each key is the same whatever K.
		if prev != nil {
			first := map[string]*Case{}
			for _, c := range prev.Cases {
				first[c.Key] = c
			}
			for key, cs := range perKey {
				if f := first[key]; f == nil || f.Node != cs[0].Node || f.Step != cs[0].Step {
					t.Errorf("key %s: first case differs between keep 1 and keep %d", key, keep)
				}
			}
		}
		prev = rec
	}
}

func TestCarveOnlySomeOps(t *testing.T) {
	model, err := frontend.BuiltinTiny()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Carve(model.Module, model.Tokenizer, Options{Prompt: "hi there", Steps: 12, Probe: passes.Options{"ops": []string{"matmul"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range rec.Cases {
		if c.Op != "matmul" {
			t.Errorf("case %s: op %s; only matmul outputs were probed", c.ID, c.Op)
		}
	}
	// Calls whose inputs or outputs were not observed are counted, not recorded.
	if rec.Stats.Recorded >= rec.Stats.Calls {
		t.Errorf("stats %+v: every call recorded with only matmul probed", rec.Stats)
	}
}

func TestCarveErrors(t *testing.T) {
	model, err := frontend.BuiltinTiny()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Carve(model.Module, nil, Options{}); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("no tokenizer: %v", err)
	}
	m := ir.NewModule("not-an-llm")
	b := ir.NewFunction(m, "main")
	x := b.Param("x", ir.T(ir.F32, ir.S(4)))
	b.Return(b.Unary(ir.OpExp, x))
	if _, err := Carve(m, model.Tokenizer, Options{}); err == nil || !strings.Contains(err.Error(), "not a language model") {
		t.Errorf("non-LLM module: %v", err)
	}
}

func TestRecorderArgsSnapshotBeforeInPlaceUpdate(t *testing.T) {
	// kv_write updates its cache argument in place; the case must record
	// the cache as it was when the call started.
	m := ir.NewModule("kv")
	b := ir.NewFunction(m, "f")
	cache := b.Param("cache", ir.T(ir.F32, ir.S(4, 1, 2)))
	nw := b.Param("new", ir.T(ir.F32, ir.S(1, 1, 2)))
	pos := b.Param("pos", ir.T(ir.I32, nil))
	b.Return(b.Op(ir.OpKVWrite, []*ir.Value{cache, nw, pos}, nil))
	pm, _, err := Compile(m, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(pm, 1, Policy{}, true)
	defer r.Close()
	c := tensor.FromFloat32([]int{4, 1, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	args := []*tensor.Tensor{c, tensor.FromFloat32([]int{1, 1, 2}, []float32{-1, -2}), tensor.ScalarInt32(2)}
	up := uploadAll(t, r, args)
	if _, err := r.Call("f", up...); err != nil {
		t.Fatal(err)
	}
	cases := r.Cases()
	if len(cases) != 1 || cases[0].Op != "kv_write" {
		t.Fatalf("cases: %v", cases)
	}
	in := cases[0].Inputs[0].t.Float32s()
	out := cases[0].Outputs[0].t.Float32s()
	if want := []float32{1, 2, 3, 4, 5, 6, 7, 8}; !equalF32(in, want) {
		t.Errorf("recorded cache input %v, want the cache before the write %v", in, want)
	}
	if want := []float32{1, 2, 3, 4, -1, -2, 7, 8}; !equalF32(out, want) {
		t.Errorf("recorded output %v, want %v", out, want)
	}
	if cases[0].Pos != 2 || cases[0].Func != "f" || cases[0].Step != 0 {
		t.Errorf("case provenance: %+v", cases[0])
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type rtBuffer = runtime.Buffer

func uploadAll(t *testing.T, r *Recorder, ts []*tensor.Tensor) []*rtBuffer {
	t.Helper()
	out := make([]*rtBuffer, len(ts))
	for i, x := range ts {
		b, err := r.Exec.Upload("", x)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}
