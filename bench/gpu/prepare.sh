#!/usr/bin/env bash
# bench/gpu/prepare.sh — run here, from the repository root, before a run on
# the GPU machine (bench/gpu/peer.sh): puts what that machine lacks in .gpu/
# and .gl/, compressed to fit the device tool's 64 MiB tree.
#
#   .gpu/benchgpu.xz   bench/gpu built from this tree
#   .gpu/spirv.test.xz codegen/spirv's tests, whose TestDeviceMMA checks the
#                      subgroup-matrix kernels against the CPU on the GPU
#                      (.gpu/spirv.test -test.run TestDeviceMMA -test.v)
#   .gpu/llama.tar.xz  llama.cpp's Vulkan build (npm @node-llama-cpp/linux-x64-vulkan,
#                      the Vulkan and CPU backends it loads) and llamacpp/llamabench.c
#                      built against it, in llama/
#   .gl/*.deb          Debian's Vulkan and GL loaders (the GPU machine has the driver only)
#
# Needs go, npm, clang (scripts/setup.sh installs clang-14) and apt-get.
set -euo pipefail
pkg=@node-llama-cpp/linux-x64-vulkan@3.22.1
# Only compressed files travel: what peer.sh unpacked in an earlier run here
# would be stale and over the tree's limit.
rm -rf .gpu/llama .gpu/benchgpu .gpu/spirv.test
mkdir -p .gpu .gl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "prepare: building benchgpu" >&2
go build -trimpath -ldflags "-s -w" -o .gpu/benchgpu ./bench/gpu
go test -c -trimpath -ldflags "-s -w" -o .gpu/spirv.test ./codegen/spirv
xz -T2 -6 -f .gpu/benchgpu .gpu/spirv.test

echo "prepare: fetching $pkg and building llamabench" >&2
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null && tar xzf ./*.tgz)
bins=$tmp/package/bins/linux-x64-vulkan
mkdir -p "$tmp/llama"
# The Vulkan backend, the base library and the CPU backends ggml picks from
# by the processor (one of them must load for the CPU side of a model).
cp "$bins"/libggml-base.so "$bins"/libggml-vulkan.so "$bins"/libggml.vulkan.v0.5.0.so \
	"$bins"/libllama.vulkan.v0.5.0.so "$bins"/libggml-cpu-{x64,haswell,icelake,sapphirerapids}.so "$tmp/llama/"
cc=$(command -v clang || command -v clang-14)
"$cc" -O2 bench/gpu/llamacpp/llamabench.c -o "$tmp/llama/llamabench" -L "$tmp/llama" \
	-l:libllama.vulkan.v0.5.0.so -l:libggml.vulkan.v0.5.0.so -l:libggml-base.so -Wl,-rpath,'$ORIGIN'
tar -C "$tmp" -cf - llama | xz -T2 -6 >.gpu/llama.tar.xz

if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
	echo "prepare: fetching the Vulkan and GL loaders into .gl" >&2
	(cd .gl && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -ch .gpu/*.xz .gl/*.deb | tail -1 | sed 's/^/prepare: carry .gpu and .gl: /' >&2
