// Package passes transforms IR modules. A pass is a named function over a
// module with typed options; a pipeline is an ordered list of passes read
// from YAML (the default one is default.yaml, embedded). Between passes the
// runner verifies the module, can print it and times each pass.
//
// Passes and the properties they require and provide are data: the tables
// in this file. A pipeline whose order breaks a requirement (legalize before
// shape_inference) is rejected before anything runs, naming the YAML line.
package passes

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/tapml/tapml/ir"
)

// Pass is one transformation of a module.
type Pass struct {
	Name string
	Doc  string
	// Options are the settings a pipeline may give the pass; Run receives
	// every one, defaults filled in.
	Options []OptionSpec
	Run     func(m *ir.Module, o Options) error
	// Requires names properties (see Properties) that must hold when the pass
	// runs; Provides, those that hold after it; Invalidates, those it may
	// break.
	Requires    []string
	Provides    []string
	Invalidates []string
	// SelfChecking passes accept a module that does not verify (shape
	// inference fixes declared types), so the runner does not verify the
	// module before them.
	SelfChecking bool
}

// Option returns the spec of the named option, or nil.
func (p *Pass) Option(name string) *OptionSpec {
	for i := range p.Options {
		if p.Options[i].Name == name {
			return &p.Options[i]
		}
	}
	return nil
}

func (p *Pass) optionNames() string {
	if len(p.Options) == 0 {
		return "none"
	}
	names := make([]string, len(p.Options))
	for i, o := range p.Options {
		names[i] = o.Name
	}
	return strings.Join(names, ", ")
}

// Property is a named fact about a module that passes establish and rely on.
type Property struct {
	Name string
	Doc  string
	// KeepToEnd: once a pass provides it, no later pass may invalidate it
	// (a target's legality must still hold in the artifact).
	KeepToEnd bool
}

// Properties is the table of module properties.
var Properties = []Property{
	{Name: "shapes", Doc: "every node's output types were re-inferred from its inputs (shape_inference)"},
	{Name: "canonical", Doc: "identity and redundant ops were simplified (canonicalize)"},
	{Name: "folded", Doc: "nodes of constant inputs were evaluated (constant_folding)"},
	{Name: "no_dead_code", Doc: "no node computes an unused value (dce)"},
	{Name: "fused", Doc: "elementwise chains were fused (fusion)"},
	{Name: "probed", Doc: "probe nodes observe op outputs (probe)"},
	{Name: "partitioned", Doc: "every node is placed on source or target, with transfers at boundaries (partition)"},
	{Name: "legalized", Doc: "every op has a kernel on the target (legalize)", KeepToEnd: true},
}

// LookupProperty returns the named property, or nil.
func LookupProperty(name string) *Property {
	for i := range Properties {
		if Properties[i].Name == name {
			return &Properties[i]
		}
	}
	return nil
}

// registry is the table of passes, in the order `tapmlc` lists them.
var registry = []*Pass{
	{
		Name: "shape_inference",
		Doc: "re-infers every node's output types from its inputs in order, replacing declared types, " +
			"and resolves reshape's -1 dims in the shape attribute",
		Run:          shapeInference,
		Provides:     []string{"shapes"},
		SelfChecking: true,
	},
	{
		Name: "canonicalize",
		Doc: "removes identity reshape/transpose/slice/cast/concat, folds reshape∘reshape and " +
			"transpose∘transpose, x*1, x/1, x+0, x-0 with constant nodes, and splats constants whose elements are equal",
		Options: []OptionSpec{
			{Name: "max_iterations", Kind: OptInt, Default: int64(16), Doc: "rewrite rounds before giving up on a fixed point", Check: positive},
		},
		Run:      canonicalize,
		Requires: []string{"shapes"},
		Provides: []string{"canonical"},
	},
	{
		Name: "constant_folding",
		Doc: "evaluates on the CPU reference every node whose inputs are all constant nodes or weights, " +
			"replacing it by a constant node (small results) or a new weight (large ones)",
		Options: []OptionSpec{
			{Name: "max_inline_elements", Kind: OptInt, Default: int64(64), Doc: "results up to this many elements become constant nodes; larger ones become weights", Check: nonNegative},
			{Name: "max_bytes", Kind: OptInt, Default: int64(256 << 20), Doc: "nodes whose result exceeds this many bytes are not folded", Check: nonNegative},
			{Name: "fold_weights", Kind: OptBool, Default: true, Doc: "also fold nodes whose inputs include weights (e.g. a transposed weight)"},
		},
		Run:         constantFolding,
		Requires:    []string{"shapes"},
		Provides:    []string{"folded"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "quantize",
		Doc: "re-encodes the 2-D weights that only matmul's transposed input and gather's table read " +
			"in a ggml block format (bit for bit as ggml's quantize_row_*_ref) or f16; norm scales and biases keep theirs",
		Options: []OptionSpec{
			{Name: "type", Kind: OptString, Default: "Q4_0", Enum: quantizationEnum(), Doc: "Q4_0, Q8_0, Q4_K, F16, or an MLC name (q4f16_1, q4f32_1, q0f16, q0f32; only their weights are mapped)"},
		},
		Run: quantizePass,
	},
	{
		Name: "split_weights",
		Doc: "cuts every weight larger than max_bytes along its outer dim into shards that fit a device's buffer and binding limits, " +
			"rewriting its readers: gather's table (axis 0) as a gather per shard selected by id range, matmul's transposed weight as a matmul per shard concatenated along the last axis",
		Options: []OptionSpec{
			{Name: "max_bytes", Kind: OptInt, Default: int64(0), Doc: "the largest weight in bytes a device holds in one buffer; 0 splits nothing (tapmlc sets it from the device's limits)", Check: nonNegative},
		},
		Run:         splitPass,
		Requires:    []string{"shapes"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "dce",
		Doc: "removes nodes whose outputs are unused and that have no side effect (kv_write and probe are kept), " +
			"and weights no function reads",
		Options: []OptionSpec{
			{Name: "weights", Kind: OptBool, Default: true, Doc: "also remove weights no function reads"},
		},
		Run:      dce,
		Provides: []string{"no_dead_code"},
	},
	{
		Name: "fusion",
		Doc: "fuses producer→consumer chains of elementwise ops (unary, binary, fused_elementwise) into one " +
			"fused_elementwise node when the intermediate has one use; provenances are joined with '+'",
		Options: []OptionSpec{
			{Name: "max_inputs", Kind: OptInt, Default: int64(7), Check: atLeast(1),
				Doc: "most inputs of a fused node (WebGPU guarantees 8 storage buffers per shader stage: 7 inputs and the output)"},
			{Name: "max_depth", Kind: OptInt, Default: int64(16), Check: atLeast(1), Doc: "deepest expression tree of a fused node"},
			{Name: "allow_broadcast", Kind: OptBool, Default: false,
				Doc: "also fuse a producer whose output is broadcast by the consumer (it is then recomputed for every broadcast element)"},
		},
		Run:         fusion,
		Requires:    []string{"shapes"},
		Provides:    []string{"fused"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "fuse_residual",
		Doc: "folds the add of a residual connection into the matmul whose result it adds (matmul's addend c) " +
			"when that result has no other reader and the types match; provenances are joined with '+'",
		Run:         fuseResidual,
		Requires:    []string{"shapes"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "fuse_norm",
		Doc: "folds an rms_norm whose rows are one token into the transposed matmuls that read it " +
			"(rms_norm_matmul nodes) when they are its only readers; provenances are joined with '+'",
		Run:         fuseNorm,
		Requires:    []string{"shapes"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "fuse_swiglu",
		Doc: "folds a fused_elementwise mul(silu($0), $1) of two rms_norm_matmul products of the same row and norm " +
			"(a decode step's gate and up) into one rms_norm_swiglu node; provenances are joined with '+'",
		Run:         fuseSwiGLU,
		Requires:    []string{"shapes"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "fuse_qkv",
		Doc: "folds three rms_norm_matmul products of the same row and norm (a decode step's q, k and v) into one " +
			"rms_norm_qkv node with their three outputs; provenances are joined with '+'",
		Run:         fuseQKV,
		Requires:    []string{"shapes"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "fuse_rope_kv",
		Doc: "folds a decode step's rope of q and of k, kv_write of the rotated k and kv_write of v (what one " +
			"attention node reads) into one rope_kv_write node; provenances are joined with '+'",
		Run:         fuseRopeKV,
		Requires:    []string{"shapes"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "probe",
		Doc: "inserts a probe node after every selected op output (all non-meta ops by default); the probe's tag is " +
			"\"n<id>:<output>\" and consumers read the probe's output, so it sits in the data path",
		Options: []OptionSpec{
			{Name: "ops", Kind: OptStrings, Doc: "probe only these ops (e.g. [matmul, rms_norm])", Check: knownOps},
			{Name: "kinds", Kind: OptStrings, Doc: "probe only ops of these kinds (elementwise, reduction, contraction, data)", Check: knownKinds},
			{Name: "nodes", Kind: OptInts, Doc: "probe only these node ids"},
			{Name: "prov", Kind: OptString, Doc: "probe only nodes whose provenance matches this regular expression", Check: validRegexp},
		},
		Run:      probe,
		Requires: []string{"shapes"},
		Provides: []string{"probed"},
	},
	{
		Name: "partition",
		Doc: "places every node on \"source\" or \"target\" by a policy and inserts transfer nodes at every " +
			"boundary (one per value and destination); parameters live on source",
		Options: []OptionSpec{
			{Name: "policy", Kind: OptString, Default: "all_target", Enum: []string{"all_source", "all_target", "nodes", "ops", "layers", "first_k"},
				Doc: "which nodes go to target: all_source, all_target, nodes (ids in nodes), ops (names in ops), layers (provenance layers.N. with N in layers), first_k (the first k non-meta nodes of each function)"},
			{Name: "nodes", Kind: OptInts, Doc: "node ids for policy nodes"},
			{Name: "ops", Kind: OptStrings, Doc: "op names for policy ops", Check: knownOps},
			{Name: "layers", Kind: OptString, Doc: "layer ranges for policy layers, e.g. \"0-3,7\"", Check: validRanges},
			{Name: "k", Kind: OptInt, Default: int64(0), Doc: "node count for policy first_k", Check: nonNegative},
		},
		Run:         partition,
		Requires:    []string{"shapes"},
		Provides:    []string{"partitioned"},
		Invalidates: []string{"legalized"},
	},
	{
		Name: "legalize",
		Doc: "checks that every op placed on the target (every op, when the module is not partitioned) has a " +
			"kernel there, and reports all unsupported ops with counts in one error",
		Options: []OptionSpec{
			{Name: "target", Kind: OptString, Default: "", Doc: "the target's name, for messages (the compile command sets it)"},
			{Name: "supports", Kind: OptFunc, Doc: "func(op ir.Op) bool: whether the target has a kernel for op (the compile command sets it; YAML cannot)"},
		},
		Run:      legalize,
		Requires: []string{"shapes"},
		Provides: []string{"legalized"},
	},
}

// Lookup returns the named pass, or nil.
func Lookup(name string) *Pass {
	for _, p := range registry {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// All returns every registered pass.
func All() []*Pass { return append([]*Pass(nil), registry...) }

func passNames() string { return strings.Join(registryNames(), ", ") }

// Option checks used by the table above.

func positive(v any) error {
	if v.(int64) <= 0 {
		return fmt.Errorf("must be positive")
	}
	return nil
}

func nonNegative(v any) error {
	if v.(int64) < 0 {
		return fmt.Errorf("must not be negative")
	}
	return nil
}

func atLeast(n int64) func(any) error {
	return func(v any) error {
		if v.(int64) < n {
			return fmt.Errorf("must be at least %d", n)
		}
		return nil
	}
}

func knownOps(v any) error {
	for _, op := range v.([]string) {
		if _, ok := ir.OpNamed(op); !ok {
			return fmt.Errorf("unknown op %q", op)
		}
	}
	return nil
}

func knownKinds(v any) error {
	kinds := map[string]bool{}
	for _, d := range ir.Ops() {
		kinds[string(d.Kind)] = true
	}
	for _, k := range v.([]string) {
		if !kinds[k] {
			names := make([]string, 0, len(kinds))
			for n := range kinds {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("unknown op kind %q (kinds: %s)", k, strings.Join(names, ", "))
		}
	}
	return nil
}

func validRegexp(v any) error {
	_, err := regexp.Compile(v.(string))
	return err
}

func validRanges(v any) error {
	_, err := parseRanges(v.(string))
	return err
}
