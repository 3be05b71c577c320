package wgsl

import (
	"fmt"
	"slices"
	"strconv"
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
	// Rows a subgroup takes at once; 1 turns the discrete GPUs' 8 off.
	for _, b := range []int{1, 2, 4, 8} {
		add(Tuning{GEMVBatch: b})
	}
	add(Tuning{GEMVBatch: 4, GEMVRows: 8})
	add(Tuning{GEMVBatch: 2, GEMVRowLanes: 16, GEMVRows: 8})
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
	from, to := gemvKnobs(&t), gemvKnobs(u)
	for i, f := range from {
		if f.n != nil && *f.n != 0 {
			*to[i].n = *f.n
		}
		if f.b != nil && *f.b {
			*to[i].b = true
		}
	}
}

// gemvKnob is one GEMV knob of a Tuning: its field's name and the field,
// an int (n) or a bool (b).
type gemvKnob struct {
	name string
	n    *int
	b    *bool
}

// gemvKnobs are t's GEMV knobs, in the order GEMVString writes them.
func gemvKnobs(t *Tuning) []gemvKnob {
	return []gemvKnob{{"GEMVLanes", &t.GEMVLanes, nil}, {"GEMVMinGroups", &t.GEMVMinGroups, nil}, {"GEMVUnroll", &t.GEMVUnroll, nil},
		{"GEMVRowLanes", &t.GEMVRowLanes, nil}, {"GEMVRows", &t.GEMVRows, nil}, {"GEMVThreads", &t.GEMVThreads, nil},
		{"GEMVChunk", &t.GEMVChunk, nil}, {"GEMVBatch", &t.GEMVBatch, nil}, {"GEMVBatchMinGroups", &t.GEMVBatchMinGroups, nil},
		{"GEMVBatchBytes", &t.GEMVBatchBytes, nil}, {"GEMVTreeBatch", &t.GEMVTreeBatch, nil},
		{"GEMVStageA", nil, &t.GEMVStageA}, {"GEMVNoStage", nil, &t.GEMVNoStage}}
}

// GEMVString is the Go literal of t's GEMV knobs that are set, such as
// "GEMVRowLanes: 16, GEMVRows: 8".
func GEMVString(t Tuning) string {
	var parts []string
	for _, f := range gemvKnobs(&t) {
		switch {
		case f.n != nil && *f.n != 0:
			parts = append(parts, fmt.Sprintf("%s: %d", f.name, *f.n))
		case f.b != nil && *f.b:
			parts = append(parts, f.name+": true")
		}
	}
	return strings.Join(parts, ", ")
}

// ParseGEMV reads GEMVString's form ("GEMVBatch: 4, GEMVRows: 8"; "" or
// "default" is no knob) into a Tuning with those knobs set.
func ParseGEMV(s string) (Tuning, error) {
	var t Tuning
	if s = strings.TrimSpace(s); s == "" || s == "default" {
		return t, nil
	}
	knobs := gemvKnobs(&t)
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(part, ":")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		i := slices.IndexFunc(knobs, func(k gemvKnob) bool { return k.name == name })
		if !ok || i < 0 {
			return Tuning{}, fmt.Errorf("GEMV knob %q: want NAME: VALUE with NAME one of %s", strings.TrimSpace(part), gemvKnobNames(knobs))
		}
		if k := knobs[i]; k.n != nil {
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > 1<<16 {
				return Tuning{}, fmt.Errorf("GEMV knob %s: %q is not a count", name, val)
			}
			*k.n = n
		} else {
			b, err := strconv.ParseBool(val)
			if err != nil {
				return Tuning{}, fmt.Errorf("GEMV knob %s: %q is not true or false", name, val)
			}
			*k.b = b
		}
	}
	return t, nil
}

// gemvKnobNames lists the knobs' names for ParseGEMV's error.
func gemvKnobNames(ks []gemvKnob) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}
