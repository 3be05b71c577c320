#!/usr/bin/env bash
# Measures two builds of tapml's benchmarks in one run on the same GPU, in
# alternation, so that a change's effect on speed is not confused with the
# machine's drift: prefill and decode tok/s of a TinyLlama-1.1B-shaped GGUF
# (random weights) on the vulkan and webgpu targets (the `bench` command,
# the code path of `tapmlc run`), and the GFLOP/s of the matmul and GEMV
# shapes of `benchgpu run -defaults` on the vulkan target.
#
#   bench/gpu/before_after.sh DIR OUT [REPEATS]
#
# DIR holds bench-before, benchgpu-before, bench-after and benchgpu-after
# (plain or .xz), and optionally llama/ with llamacpp/llamabench.c built
# against llama.cpp's Vulkan libraries (then llama.cpp's own speed on the
# same file is measured too, for context); OUT receives one log per
# measurement and summary.txt.
set -euo pipefail
dir=$1 out=$2 reps=${3:-3}
mkdir -p "$out"
for f in "$dir"/*.xz "$dir"/llama/*.xz; do [ -e "$f" ] && xz -dkf "$f"; done
chmod +x "$dir"/bench-* "$dir"/benchgpu-*
model=/tmp/tinyllama-f32.gguf
[ -e $model ] || "$dir"/benchgpu-after gguf -shape tinyllama -type F32 -o $model 2>&1 | tail -1

for r in $(seq 1 "$reps"); do
	for v in before after; do
		"$dir"/bench-$v -targets vulkan,webgpu -models $model -prefill 128 -decode 64 -matmul "" \
			>"$out/llm-$v-$r.txt" 2>"$out/llm-$v-$r.err" || echo "llm $v $r failed" >>"$out/llm-$v-$r.txt"
		"$dir"/benchgpu-$v run -target vulkan -defaults -models "" -out "/tmp/mm-$v-$r" \
			2>"$out/mm-$v-$r.txt" || echo "matmul $v $r failed" >>"$out/mm-$v-$r.txt"
	done
done

if [ -x "$dir/llama/llamabench" ]; then
	"$dir/llama/llamabench" "$dir/llama" $model 128 64 "$reps" >"$out/llamacpp.txt" 2>&1 || true
fi

{
	[ -e "$out/llamacpp.txt" ] && { echo "# llama.cpp Vulkan, same file"; cat "$out/llamacpp.txt"; }
	echo "# LLM (bench: prefill 128, decode 64; tok/s)"
	for f in "$out"/llm-*.txt; do echo "## $(basename "$f" .txt)"; grep -E "vulkan|webgpu" "$f" || cat "$f"; done
	echo "# matmul on vulkan (benchgpu -defaults; GFLOP/s)"
	for f in "$out"/mm-*.txt; do echo "## $(basename "$f" .txt)"; grep "GFLOP/s" "$f" | sed 's/^[0-9:]* matmul //' || true; done
} >"$out/summary.txt"
cat "$out/summary.txt"
