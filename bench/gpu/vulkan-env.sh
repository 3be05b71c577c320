# bench/gpu/vulkan-env.sh — sourced by bench/gpu's GPU-machine scripts:
# unpacks Debian's Vulkan and GL loaders from .gl/ where the machine has
# none (it has the NVIDIA driver only; bench/gpu/prepare.sh fetches them)
# and points the loader at NVIDIA's driver file.
if ! ldconfig -p | grep -q libvulkan.so.1; then
	for f in .gl/*.deb; do dpkg -x "$f" /; done
	ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
