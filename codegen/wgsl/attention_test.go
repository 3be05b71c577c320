package wgsl

import (
	"strings"
	"testing"

	"github.com/tapml/tapml/ir"
)

// TestAttentionPlan checks the shape the attention kernel takes: one
// workgroup per (query row, head), 512 invocations for a decode step where
// the device allows it, key slots of one lane per row vector, and chunks
// sized by the workgroup memory.
func TestAttentionPlan(t *testing.T) {
	h200 := Limits{MaxInvocationsPerWorkgroup: 1024, MaxWorkgroupSizeX: 1024, MaxWorkgroupStorageSize: 49152}
	for _, c := range []struct {
		name         string
		lim          Limits
		s, h, kh, dh int64
		t            int64
		wg, grid     int
		want         []string // lines of the kernel
	}{
		// TinyLlama's decode step on the H200: 32 heads of 64 (16 vec4), 4
		// kv heads, a cache of 2048 rows visited in chunks of 602.
		{"tinyllama decode", h200, 1, 32, 4, 64, 2048, 512, 32, []string{"const LANES: u32 = 16u;", "const NS: u32 = 32u;", "const CH: u32 = 602u;"}},
		{"decode webgpu limits", Limits{}, 1, 32, 4, 64, 2048, 256, 32, []string{"const NS: u32 = 16u;", "const CH: u32 = 182u;"}},
		{"prefill 128", h200, 128, 32, 4, 64, 2048, 128, 4096, []string{"const NS: u32 = 8u;"}},
		{"head dim 128", h200, 1, 8, 1, 128, 300, 512, 8, []string{"const LANES: u32 = 32u;", "const NS: u32 = 16u;", "const CH: u32 = 300u;"}},
		// Rows wider than the workgroup: one slot, lanes owning 2 vectors,
		// the second only where it falls inside the row.
		{"head dim 1032", Limits{}, 1, 2, 1, 1032, 16, 256, 2, []string{"const NS: u32 = 1u;", "let q1 = in0[qb + min(j + 256u, G - 1u)];"}},
	} {
		n := &ir.Node{ID: 1, Op: ir.OpAttention, Attrs: ir.Attrs{"scale": ir.FloatAttr(0.125), "causal": ir.BoolAttr(true)}}
		in := []ir.Type{f32(c.s, c.h, c.dh), f32(c.t, c.kh, c.dh), f32(c.t, c.kh, c.dh), i32()}
		k, err := Generate(n, in, nil, Options{Limits: c.lim})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if k.WorkgroupSize != [3]int{c.wg, 1, 1} || k.Grid != [3]int{c.grid, 1, 1} {
			t.Errorf("%s: workgroup %v, grid %v; want %d invocations, %d workgroups", c.name, k.WorkgroupSize, k.Grid, c.wg, c.grid)
		}
		src := string(k.Source)
		for _, line := range c.want {
			if !strings.Contains(src, line) {
				t.Errorf("%s: no %q in\n%s", c.name, line, src)
			}
		}
	}
}
