package vulkan

import (
	"testing"

	"github.com/tapml/tapml/ir"
)

// TestProfile times two dispatches: each kind (op, input types, grid)
// appears with its calls, the times add up to the submissions' GPU time,
// the results stay right, and ending the profile clears it.
func TestProfile(t *testing.T) {
	d := openTest(t, Options{})
	if err := d.Profile(true); err != nil {
		t.Fatal(err) // lavapipe has compute timestamps
	}
	add, outs := mkNode(t, 1, ir.OpAdd, nil, f32(4096), f32(4096))
	a := upload(t, d, seq(0, 4096))
	x := launch(t, d, add, outs, a, a)[0]
	y := launch(t, d, add, outs, x, x)[0]
	got := download(t, d, y).Float32s()
	if got[5] != 20 {
		t.Errorf("y[5] = %v, want 20", got[5])
	}
	kinds, gpu := d.Profiled()
	calls := map[string]int{}
	var sum int64
	for _, k := range kinds {
		calls[k.Name] = k.Calls
		sum += int64(k.Time)
		if k.Time < 0 {
			t.Errorf("%s: negative time %v", k.Name, k.Time)
		}
	}
	if calls["add f32[4096],f32[4096] 16x1x1"] != 2 {
		t.Errorf("profile %+v: want 2 adds of two f32[4096] in 16 workgroups", kinds)
	}
	if gpu <= 0 || sum != int64(gpu) {
		t.Errorf("the commands' times sum to %d ns, the submissions' GPU time is %v: want equal and positive", sum, gpu)
	}
	if err := d.Profile(false); err != nil {
		t.Fatal(err)
	}
	if k, _ := d.Profiled(); k != nil {
		t.Errorf("after the profile ended: %+v", k)
	}
}
