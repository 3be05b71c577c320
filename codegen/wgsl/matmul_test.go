package wgsl

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/codegen/internal/kerneltest"
	"github.com/tapml/tapml/ir"
)

func TestParseVecTile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want vecTile
		err  string // "" for no error
	}{
		{"64x64x16/4x4", vecTile{bm: 64, bn: 64, bk: 16, tm: 4, tn: 4, slices: 1}, ""},
		{"32x32x16/4x4+p*4", vecTile{bm: 32, bn: 32, bk: 16, tm: 4, tn: 4, prefetch: true, slices: 4}, ""},
		{"16x16x16/4x4*2", vecTile{bm: 16, bn: 16, bk: 16, tm: 4, tn: 4, slices: 2}, ""},
		{"32x32x8/4x4+d*64", vecTile{bm: 32, bn: 32, bk: 8, tm: 4, tn: 4, prefetch: true, double: true, slices: 64}, ""},
		{"32x32x16/4x4+p+t*4", vecTile{bm: 32, bn: 32, bk: 16, tm: 4, tn: 4, prefetch: true, rows4: true, slices: 4}, ""},
		{"128x128x8/8x8+t", vecTile{bm: 128, bn: 128, bk: 8, tm: 8, tn: 8, rows4: true, slices: 1}, ""},
		{"32x32x16/4x4+t+p", vecTile{}, "want BMxBNxBK"},
		{"32x32x16/4x4*3", vecTile{}, "power of two"},
		{"32x32x16/4x4*0", vecTile{}, "power of two"},
		{"32x32x16/4x4*128", vecTile{}, "power of two"},
		{"32x32x16/4x4+p*", vecTile{}, "power of two"},
		{"32x32x16/4x4*4+p", vecTile{}, "power of two"},
		{"32x32x16*4", vecTile{}, "want BMxBNxBK"},
		{"32x32x16/3x4", vecTile{}, "multiples of 4"},
	} {
		got, err := parseVecTile(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if d := cmp.Diff(c.want, got, cmp.AllowUnexported(vecTile{})); d != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, d)
		}
	}
	for _, tile := range MatmulTiles {
		if err := ValidMatmulTile(tile); err != nil {
			t.Errorf("MatmulTiles: %v", err)
		}
	}
}

// bigLimits are a discrete GPU's (the H200's Vulkan limits).
var bigLimits = Limits{MaxInvocationsPerWorkgroup: 1024, MaxWorkgroupSizeX: 1024, MaxWorkgroupSizeY: 1024,
	MaxWorkgroupSizeZ: 64, MaxWorkgroupStorageSize: 49152, MaxWorkgroupsPerDimension: 1 << 31}

func TestMatmulTileFits(t *testing.T) {
	for _, c := range []struct {
		tile string
		lim  Limits
		want bool
	}{
		{"32x32x16/4x4+p*4", Limits{}, true},  // 256 invocations, 16 KiB
		{"32x32x16/4x4+d*4", Limits{}, false}, // 32 KiB of tiles
		{"32x32x16/4x4+d*4", bigLimits, true}, //
		{"128x32x8/8x4+p*4", Limits{}, false}, // 512 invocations
		{"128x32x8/8x4+p*4", bigLimits, true}, //
		{"64x64x8/4x4*64", bigLimits, false},  // 16384 invocations
		{"16x16x16/4x4*16", bigLimits, true},  // 256 invocations; the sums of 8 slices (8 KiB) fit the tiles' 32 KiB
		{"64x64x8/8x8*2", Limits{}, true},     // the sums of one slice (16 KiB) set the size, not the tiles (8 KiB)
		{"64x64x8/8x8*4", Limits{}, false},    // the sums of two: 32 KiB
		{"128x128x8/8x8*2", bigLimits, false}, // the sums of one slice: 64 KiB
		{"64x64x16/4x4*2", Limits{MaxWorkgroupStorageSize: 8192}, false},
		{"not a tile", bigLimits, false},
	} {
		if got := MatmulTileFits(c.tile, c.lim); got != c.want {
			t.Errorf("MatmulTileFits(%q, %+v) = %v, want %v", c.tile, c.lim, got, c.want)
		}
	}
}

// TestSlicedKernel checks what the K slices change in a kernel: the
// workgroup has S times the invocations, the grid is the tiles', the
// slices' sums meet in a tree, and a list picks a sliced blocking once its
// slices (counted as workgroups) reach MatmulMinGroups.
func TestSlicedKernel(t *testing.T) {
	tb := ir.Attrs{"transpose_b": ir.BoolAttr(true)}
	q := kerneltest.Case{Name: "prefill q", Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(128, 2048), f32(2048, 2048)}}
	kv := kerneltest.Case{Name: "prefill k", Op: ir.OpMatmul, Attrs: tb, In: []ir.Type{f32(128, 2048), ir.T(ir.Q4_0, ir.S(256, 2048))}}
	for _, c := range []struct {
		c      kerneltest.Case
		tune   Tuning
		slices int
		wg     int
		grid   [3]int
		marker string // in the source
	}{
		{q, Tuning{Matmul: "32x32x16/4x4+p*4"}, 4, 256, [3]int{64, 4, 1}, "slices=4"},
		// b's step is 64 vec4 for 128 invocations a slice: half load.
		{q, Tuning{Matmul: "128x32x8/8x4+d*4"}, 4, 512, [3]int{64, 1, 1}, "if (lt < 64u) {"},
		{kv, Tuning{Matmul: "16x16x16/4x4+p*8"}, 8, 128, [3]int{16, 8, 1}, "slices=8"},
		// 4 rows of a vec4 each, stored as 4 vec4.
		{kv, Tuning{Matmul: "16x16x16/4x4+p+t*8"}, 8, 128, [3]int{16, 8, 1}, "] = vec4<f32>(ra0_0.x, ra0_1.x, ra0_2.x, ra0_3.x);"},
		// 64x64: 64 groups; 32x32 in 4 slices: 256 groups, 1024 slices.
		{q, Tuning{Matmul: "64x64x16/4x4+p,32x32x16/4x4+p*4", MatmulMinGroups: 264}, 4, 256, [3]int{64, 4, 1}, "slices=4"},
		{q, Tuning{Matmul: "64x64x16/4x4+p,32x32x16/4x4+p*4", MatmulMinGroups: 64}, 1, 256, [3]int{32, 2, 1}, "slices=1"},
	} {
		k, err := generate(t, c.c, Options{Limits: bigLimits, Tuning: c.tune})
		if err != nil {
			t.Fatalf("%s %s: %v", c.c.Name, c.tune.Matmul, err)
		}
		src := string(k.Source)
		if k.WorkgroupSize != [3]int{c.wg, 1, 1} || k.Grid != c.grid || !strings.Contains(src, c.marker) || !strings.Contains(src, "vec4 tiled matmul") {
			t.Errorf("%s %s: workgroup %v, grid %v, want %d and %v with %q", c.c.Name, c.tune.Matmul, k.WorkgroupSize, k.Grid, c.wg, c.grid, c.marker)
		}
		if sliced := c.slices > 1; sliced != strings.Contains(src, "if (slice != 0u) { return; }") {
			t.Errorf("%s %s: the slices' tree is there: %v, want %v", c.c.Name, c.tune.Matmul, !sliced, sliced)
		}
		checkKernel(t, c.c, k, bigLimits.withDefaults())
	}
}
