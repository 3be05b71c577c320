#!/bin/bash
# bench/gpu/run.sh OUTDIR — run on the GPU machine from the repository root,
# with .gpu/benchgpu built for it (go build -o .gpu/benchgpu ./bench/gpu)
# and, where the machine has no Vulkan loader, Debian's loader packages in
# .gl/ (see bench/gpu/README.md). Measures ours (benchgpu run), the native
# stack (native.py) and writes OUTDIR/results.md.
set -u
out=${1:-${OUT:-bench-out}}
mkdir -p "$out"
. bench/gpu/vulkan-env.sh
export PYTHONUNBUFFERED=1
# The Hugging Face copies (4.4 GB for TinyLlama) go to memory when it has room.
hf=/tmp/tapml-hf
if [ "$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)" -gt 20000000 ] 2>/dev/null; then hf=/dev/shm/tapml-hf; fi
{
	date -u
	nvidia-smi
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
} >"$out/run.log" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv >"$out/smi.txt" 2>&1
.gpu/benchgpu run -out "$out" -hf "$hf" -cpuprofile "$out/decode.prof" ${BENCH_ARGS:-} 2>&1 | tee -a "$out/run.log"
python3 bench/gpu/native.py "$out/ours.json" "$out/native.json" 2>&1 | tee -a "$out/run.log"
.gpu/benchgpu table -ours "$out/ours.json" -native "$out/native.json" -smi "$out/smi.txt" >"$out/results.md"
rm -rf "$hf"
cat "$out/results.md"
