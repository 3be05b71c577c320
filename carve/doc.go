// Package carve turns one real run of a model into per-operator unit tests
// and replays them on any target.
//
// # Carving
//
// Carve compiles the model with the pass pipeline plus the probe pass,
// runs it on the CPU reference through prefill and each decode step of a
// prompt (greedy), and records every op call (Recorder): the outputs come
// from the probes, the inputs from earlier outputs, from the call's
// arguments (snapshot when the call starts, because kv_write updates the
// caches in place) and from the module's weights. Calls are deduplicated as
// they come by a content key (ContentKey: op, attributes, dtypes, shapes
// and a coarse Fingerprint of every input and output: the binary exponent
// of the largest magnitude, NaN/Inf presence, the share of zeros); the
// first Keep calls of each key become cases. Each case gets a tolerance
// from the Policy (see Policy for the formulas and why). Under f16 compute
// (Options.Compute) the reference emulates f16 storage, the cases record
// compute f16 and get Policy.ForCompute's tolerance, and replay judges
// them against the recorded outputs and the f32 truth.
//
// Several input sets carve together (Options.Prompts, CallOptions.
// InputSets): their calls share one deduplication, so a value that only
// some inputs produce is carved too; each case records its set.
//
// Models that are not language models (ONNX vision models: any module
// without @prefill and @decode, see IsLanguageModel) are carved by
// CarveCalls: one call of each function (usually @main) on inputs given as
// tensors or files (ReadInput: .npy, ONNX TensorProto .pb, raw values) or
// seeded random values (Rand: uniform in [-1, 1), or a page of text-like
// marks for text detectors; the generator of scripts/ort_run.mjs, so the
// same seed gives ONNX Runtime the same inputs). The manifest records the
// seed and each input's source.
//
// # Bundles
//
// Recording.Write writes the cases as a bundle folder, atomically (a
// temporary folder renamed into place; an existing bundle is replaced only
// once the new one is complete, and a folder that is not a bundle is never
// replaced):
//
//	manifest.yaml        format name and version (FormatVersion), what was
//	                     carved (model, prompt, steps, keep, pipeline, the
//	                     generated tokens), run statistics (calls seen,
//	                     recorded, content keys, cases kept), every file with
//	                     its size and SHA-256, case_count, and the cases
//	tensors.safetensors  recorded inputs and outputs (t1, t2, ...); a tensor
//	                     several cases read is stored once
//	weights.safetensors  the module weights the cases read, by IR name,
//	                     each stored once per bundle
//	module.tir           the compiled, probed module (text form, no weight
//	                     data), which every case's node id refers to
//
// A case (see Case) records the op, its kind and attributes (text form),
// its inputs and outputs (IR value name, dtype, shape, and the tensor or
// weight that holds the data), the IR node id, its text line and
// provenance, the function and step of the run it came from, its content
// key with the number of calls that shared it, its tolerance and its
// compute dtype (f16, or nothing for f32).
//
// Open reads a bundle and checks everything before any case runs: the
// format version (a newer one is refused by name), the manifest's
// structure (unknown fields, a case count that does not match: truncated),
// each file's size and checksum (missing, truncated, corrupt), and each
// case against the op registry and the tensor files. Errors name the file
// and the case; nothing is ever written.
//
// # Replay
//
// Bundle.Module builds the one-op module of a case (parameters for the
// recorded inputs, the recorded weights, one node with the case's op,
// attributes, node id and provenance); Run runs it on any runtime.Device;
// Bundle.Replay compares the outputs (Compare: max abs and rel error, ULP
// distance for floats, cosine similarity, each element against the
// tolerance) and Bundle.Test replays a selection of cases and returns a
// Report, which writes a terminal table, JSON, JUnit XML and an HTML page
// (gonum/plot plots of every case's error grouped by op, got against want
// and heat maps of where a failing case's error sits, the table, and the
// IR node each case links to). Overrides change tolerances from a YAML
// file. ReplayOptions compare with another device instead of the recorded
// outputs, repeat a case to find run-to-run differences (Variation, with
// where they are: Grid), time its kernel warm (OpTimes ranks the ops), and
// keep a failing case's tensors; Test plants test-only faults a bundle
// records (Manifest.Faults) and tells whether they fired.
package carve
