#!/usr/bin/env bash
# Installs what tapml's targets and tests need on a fresh Debian 12 machine:
# a CPU Vulkan driver (lavapipe) for the webgpu target, SPIR-V tools, clang-14
# for the llvm target, and Go modules. Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

packages=(mesa-vulkan-drivers libvulkan1 spirv-tools clang-14 llvm-14)
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
echo "setup: done" >&2
