package wgsl

import (
	"fmt"
	"strings"
)

// GEMVVariant is one setting of the decode GEMV's knobs (Tuning.GEMV*):
// what bench/gpu's gemv command measures and the device tests run.
// Only the GEMV knobs of Tuning that are not zero count.
type GEMVVariant struct{ Tuning Tuning }

// Name is the variant's knobs as a Go literal, or "default" for none.
func (v GEMVVariant) Name() string {
	if s := GEMVString(v.Tuning); s != "" {
		return s
	}
	return "default"
}

// GEMVVariants are the candidates for the subgroup GEMV of the decode
// step, each applied over a device's tuning; the first is that tuning
// itself.
func GEMVVariants() []GEMVVariant {
	vs := []GEMVVariant{{}}
	add := func(t Tuning) { vs = append(vs, GEMVVariant{t}) }
	add(Tuning{GEMVUnroll: 1})
	add(Tuning{GEMVUnroll: 4})
	// Whole-subgroup rows: R rows, 32·R invocations; or 64 invocations
	// whose two subgroups take the rows in turn.
	for _, r := range []int{1, 2, 4, 8, 16, 32} {
		add(Tuning{GEMVRows: r})
	}
	add(Tuning{GEMVRows: 4, GEMVThreads: 64})
	add(Tuning{GEMVRows: 8, GEMVThreads: 64})
	add(Tuning{GEMVRows: 16, GEMVThreads: 128})
	// Several rows a subgroup, summed by subgroupShuffleXor.
	for _, c := range []struct{ lanes, rows int }{{16, 4}, {16, 8}, {16, 16}, {8, 8}, {8, 16}, {8, 32}, {4, 16}, {4, 32}, {4, 64}} {
		add(Tuning{GEMVRowLanes: c.lanes, GEMVRows: c.rows})
	}
	add(Tuning{GEMVChunk: 2})
	add(Tuning{GEMVChunk: 4})
	add(Tuning{GEMVStageA: true})
	add(Tuning{GEMVNoStage: true})
	add(Tuning{GEMVNoStage: true, GEMVRowLanes: 8, GEMVRows: 16})
	add(Tuning{GEMVRowLanes: 16, GEMVRows: 8, GEMVChunk: 2})
	add(Tuning{GEMVRowLanes: 8, GEMVRows: 16, GEMVChunk: 2})
	add(Tuning{GEMVRowLanes: 8, GEMVRows: 16, GEMVUnroll: 1})
	add(Tuning{GEMVRowLanes: 16, GEMVRows: 8, GEMVStageA: true})
	add(Tuning{GEMVRowLanes: 8, GEMVRows: 16, GEMVStageA: true})
	return vs
}

// Apply sets the variant's knobs on u.
func (v GEMVVariant) Apply(u *Tuning) {
	t := v.Tuning
	if t.GEMVUnroll != 0 {
		u.GEMVUnroll = t.GEMVUnroll
	}
	if t.GEMVRowLanes != 0 {
		u.GEMVRowLanes = t.GEMVRowLanes
	}
	if t.GEMVRows != 0 {
		u.GEMVRows = t.GEMVRows
	}
	if t.GEMVThreads != 0 {
		u.GEMVThreads = t.GEMVThreads
	}
	if t.GEMVChunk != 0 {
		u.GEMVChunk = t.GEMVChunk
	}
	u.GEMVStageA = u.GEMVStageA || t.GEMVStageA
	u.GEMVNoStage = u.GEMVNoStage || t.GEMVNoStage
}

// GEMVString is the Go literal of t's GEMV knobs that are set, such as
// "GEMVRowLanes: 16, GEMVRows: 8".
func GEMVString(t Tuning) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    int
	}{{"GEMVLanes", t.GEMVLanes}, {"GEMVMinGroups", t.GEMVMinGroups}, {"GEMVUnroll", t.GEMVUnroll},
		{"GEMVRowLanes", t.GEMVRowLanes}, {"GEMVRows", t.GEMVRows}, {"GEMVThreads", t.GEMVThreads}, {"GEMVChunk", t.GEMVChunk}} {
		if f.v != 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", f.name, f.v))
		}
	}
	if t.GEMVStageA {
		parts = append(parts, "GEMVStageA: true")
	}
	if t.GEMVNoStage {
		parts = append(parts, "GEMVNoStage: true")
	}
	return strings.Join(parts, ", ")
}
