#!/usr/bin/env bash
# bench/gpu/vs.sh OUT "VARIANTS" — run on the GPU machine, from the repository
# root, with .gpu/ and .gl/ from bench/gpu/prepare.sh, like peer.sh: compares
# tunings in one process per file with `benchgpu profile -vs VARIANTS` (each
# variant a set of profile's tuning flags, separated by ';'; an empty one is
# the device's default, e.g. "; -mma-f32-blocks; -no-mma-scaled") and writes
# each file's table to OUT/vs-NAME.md, the log beside it.
#
# FILES (default llama32-1b-Q4_0; shape-type names as peer.sh's, written to
# /tmp when missing), TARGET (vulkan, vulkan/f16 or vulkan/webgpu), ROUNDS
# (3) and REPS (5, prefills of a tuning back to back each round) set the run;
# BIN (default .gpu/benchgpu) another build of benchgpu, to compare builds
# call by call.
# Compare minima: the GPU's clock drops between bursts of work
# (bench/results/2026-12-04-h200-reps.md).
set -euo pipefail
out=${1:?usage: bench/gpu/vs.sh OUT "VARIANTS"}
variants=${2:?usage: bench/gpu/vs.sh OUT "VARIANTS"}
mkdir -p "$out"
. bench/gpu/vulkan-env.sh
bin=${BIN:-.gpu/benchgpu}
[ -x "$bin" ] || xz -dkf "$bin.xz"
chmod +x "$bin"
IFS=, read -ra names <<<"${FILES:-llama32-1b-Q4_0}"
for n in "${names[@]}"; do
	shape=${n%-*} typ=${n##*-} f=/tmp/$n.gguf
	[ -e "$f" ] || "$bin" gguf -shape "$shape" -type "$typ" -o "$f" 2>&1 | tail -1
	"$bin" profile -model "$f" -target "${TARGET:-vulkan}" -rounds "${ROUNDS:-3}" -reps "${REPS:-5}" -vs "$variants" \
		>"$out/vs-$n.md" 2>"$out/vs-$n.log"
	cat "$out/vs-$n.md"
done
