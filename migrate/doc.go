// Package migrate moves a model from the source (the CPU reference, or
// another target given as the reference) to a target device step by step,
// comparing every mixed placement end to end with the reference, and
// localises the culprit when one diverges.
//
// # Runs
//
// New compiles the model once (the pass pipeline, without probes) and runs
// the all-source reference once. What a run is depends on the model (see
// workload): a language model (@prefill and @decode) runs the greedy
// decoding of the prompt for Steps positions, recording the tokens fed to
// each forward call and the logits each returned; any other model (an ONNX
// model) calls each of its functions once on fixed inputs (given by name,
// from files, or seeded random values, as `tapmlc run` makes them),
// recording every result. A mixed run (Driver.Eval) places a set of node
// ids on the target with the partition pass (policy nodes; node ids survive
// partitioning, so a node keeps its id in every placement and in carved
// cases), makes the same calls (a language model's teacher-forced with the
// reference's tokens) and compares them with the reference.
//
// Candidates are the op nodes (not probes, transfers or constants) of the
// functions the runs call, that the target has a kernel for; the others
// stay on the source and the report lists them. Their topological order is
// the functions' (prefill's nodes, then decode's).
//
// # Divergence
//
// A language model's run diverges when a greedy token differs from the
// reference's, when a logit differs by more than Thresholds.MaxLogitErr
// (default 1e-3), when a KL divergence exceeds Thresholds.MaxKL (default
// 1e-5), or when the run fails (a kernel that does not build or run). Both
// defaults sit orders of magnitude above f32 reordering noise
// (stories260K fully on lavapipe: logit error 9e-6, KL 4e-13) and below
// what a real bug does. Teacher forcing keeps every step comparable after
// a first difference.
//
// Any other model's run diverges when an element of an output differs
// from the reference's by more than atol + rtol·|want|, or when the run
// fails. Each output's tolerance is carve.Chain over its worst path: rtol
// is the largest sum of the carving policy's per-op rtols along a path of
// ops from the inputs to the output (first-order error propagation), atol
// = rtol·S with S the output's largest reference magnitude; the report
// states it, with its rule, for every output. (PP-OCR's classifier on
// lavapipe uses 0.1% of it; mnist 1%.)
//
// # Strategies
//
// Incremental (Driver.RunIncremental) moves op kinds in a fixed order, one
// op per step, cumulatively: data movement first (gather, kv_write,
// reshape, slice, ...: no arithmetic), then elementwise (add,
// fused_elementwise, rope, ...), reductions (rms_norm, softmax, ...) and
// contractions last (attention, matmul); within a kind op names
// alphabetically (OpSteps). After each step the model runs end to end. At
// the first diverging step the op's nodes move again layer by layer on top
// of the earlier steps (LayerSteps: the nodes before the first layer,
// layers.0, layers.1, ..., the nodes after the last), and the first
// diverging layer group is bisected to the smallest set. The migration
// stops there; with no divergence its last step has every candidate on the
// target.
//
// Bisect (Driver.RunBisect) runs every candidate on the target; when that
// diverges it binary-searches the shortest diverging prefix of the
// topological order (whose last node is the culprit), checks that node
// alone on the target, and, when it agrees alone, binary-searches the
// latest start of a diverging window ending at it: the smallest contiguous
// set. A single faulty kernel takes 1 + ceil(log2 N) + 1 runs for N
// candidates (10 for stories260K's 217). The search assumes divergence is
// monotone in the prefix, which a faulty kernel satisfies.
//
// # Suspects
//
// For each node of the culprit set (Suspect) the driver carves its calls
// from a reference run (carve's recorder with probes on those nodes alone,
// every call kept) and reports its isolated error (its cases replayed alone
// on the target: reference inputs, against the recorded outputs or the
// reference device's) and its accumulated error (its outputs in the
// diverging mixed run against those in the reference placement, both
// recorded call by call), the error of its
// inputs in that run, the amplification (accumulated / isolated) and the
// condition (accumulated / input error). A node whose isolated error is out
// of tolerance is a kernel bug; one that is right on the reference inputs
// but out of tolerance in the mixed run is ill-conditioned when it magnifies
// its input error more than tenfold, else it propagates an upstream error;
// when both are within tolerance the divergence accumulated over the set. With
// Options.Regression set, the culprit's failing cases (or its first case)
// are written there as a carve bundle that `tapmlc test` replays.
//
// # Reports
//
// Report.WriteText (terminal), WriteJSON and WriteHTML (the migration curve
// plotted with gonum/plot: each run's error, the share of nodes on the
// target, the per-step or per-output error of the final placement; the
// table of runs; the culprit with its errors; the kernel time per op of
// the final placement, measured warm by TimeOps). Dump writes every target
// node's outputs in a placement and in the reference placement as .npy
// files. ExitCode maps the outcome to `tapmlc migrate`'s exit code: 0
// identical, 1 divergence localised, 3 an injected fault never fired (2 is
// the command's own failure).
//
// # Fault injection and mutation testing
//
// Driver.Inject plants codegen/wgsl's test-only faults (webgpu, remote:) in the
// target's kernels, by op (every node of it whose kernel the fault applies
// to) or by node id, so tests can plant a known culprit. A regression
// bundle records the faults planted in its nodes (`tapmlc test` plants
// them again). When nothing diverges under planted faults, FaultsFired
// runs the faulted nodes without their faults: bit-identical outputs mean
// the fault never fired (OutcomeNotFired), and the run tested nothing. Mutants,
// CarveSuite, Detect and MutationScore measure the tools: for each mutant
// (one fault in one node) whether the carved tests detect it (the suite
// keeps every call of every node, so each node has its own cases) and
// whether bisection names exactly that node, with the runs it took.
package migrate
