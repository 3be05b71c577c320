#!/usr/bin/env bash
# bench/gpu/peer.sh OUT — run on the GPU machine, from the repository root,
# with .gpu/ and .gl/ from bench/gpu/prepare.sh: the README's table against
# llama.cpp's Vulkan backend (issue 16) in one command. Writes the GGUF files
# (random weights: TinyLlama-1.1B's shape in F32, F16 and Q4_0, Llama-3.2-1B's
# in F32, F16, Q4_0 and Q8_0), measures the vulkan target at f32 and f16 compute,
# webgpu and llama.cpp on each (prompt 128, 64 greedy steps, REPEATS warm runs,
# default 5, whose medians and ranges the table gives) and
# writes OUT/peer.md and OUT/peer.log. The GPU's SM clock, before and after,
# goes in OUT/clocks.txt: an idle H200 reads 345 MHz against 1980
# (bench/results/2026-12-04-h200-tile-sweep.md).
#
# FILES (default all seven: tinyllama-F32,...,llama32-1b-Q8_0) and TARGETS
# (default vulkan,vulkan/f16,webgpu) narrow the run; REPEATS sets the warm runs.
set -euo pipefail
out=${1:?usage: bench/gpu/peer.sh OUT}
mkdir -p "$out"
. bench/gpu/vulkan-env.sh
[ -x .gpu/benchgpu ] || xz -dkf .gpu/benchgpu.xz
chmod +x .gpu/benchgpu
[ -d .gpu/llama ] || xz -dc .gpu/llama.tar.xz | tar -C .gpu -xf -

clocks() {
	{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 || true; } | sed "s/^/$1: /"
}
clocks before >"$out/clocks.txt"
files=()
IFS=, read -ra names <<<"${FILES:-tinyllama-F32,tinyllama-F16,tinyllama-Q4_0,llama32-1b-F32,llama32-1b-F16,llama32-1b-Q4_0,llama32-1b-Q8_0}"
for n in "${names[@]}"; do
	shape=${n%-*} typ=${n##*-} f=/tmp/$n.gguf
	[ -e "$f" ] || .gpu/benchgpu gguf -shape "$shape" -type "$typ" -o "$f" 2>&1 | tail -1
	files+=("$f")
done
.gpu/benchgpu peer -files "$(IFS=,; echo "${files[*]}")" -targets "${TARGETS:-vulkan,vulkan/f16,webgpu}" \
	-llamabench .gpu/llama/llamabench -backends .gpu/llama -prefill 128 -decode 64 -repeats "${REPEATS:-5}" \
	-o "$out/peer.md" 2>&1 | tee "$out/peer.log"
clocks after >>"$out/clocks.txt"
cat "$out/clocks.txt"
