#!/usr/bin/env bash
# Builds, once, the tier-1 environment: a Debian sid root with ROCm 6.4
# userspace (HIP runtime, hipRTC, rocBLAS, MIOpen), g++, and hipcc with
# Python 3 (to build flashattn's Composable Kernel shim); and NVIDIA's NVRTC
# 12 from Debian's non-free section with the seven CUDA headers that NVRTC
# compiles of rocm-go's kernels include (cuda_fp16.h, cuda_bf16.h and theirs,
# in /usr/local/cuda/include, taken from nvidia-cuda-dev, whose 0.9 GB
# download is not kept), so that tier 1 compiles every kernel for NVIDIA
# too; and RCCL (below). Idempotent: an
# existing, complete root is kept; a half-built one from an interrupted run is
# removed and built again. Needs root (debootstrap, chroot).
#
#   ROCM_GO_ENV   where the root lives (default: ~/.cache/rocm-go/sid-rocm6.4)
set -euo pipefail

env_dir=${ROCM_GO_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rocm-go/sid-rocm6.4}
mirror=${ROCM_GO_MIRROR:-http://deb.debian.org/debian}
packages="libamdhip64-dev libhiprtc6 librocblas-dev libmiopen-dev g++ hipcc python3"
# NVRTC's headers: what cuda_fp16.h and cuda_bf16.h include, NVRTC having
# the rest built in.
cuda_headers="cuda_fp16.h cuda_fp16.hpp cuda_bf16.h cuda_bf16.hpp vector_types.h vector_functions.h vector_functions.hpp"
# RCCL. Debian carries two: sid's rccl 5.4.3 (NCCL 2.13.4's API) is built
# for ROCm 5.7's HIP (libamdhip64-5), which sid can no longer install, and
# experimental's 7.2.4 (NCCL 2.27.7's API) for ROCm 7.2's, whose install
# would upgrade the root's ROCm 6.4. So experimental's packages are
# unpacked, not installed: rccl.h into /usr/include/rccl, where librccl-dev
# puts it (it needs only HIP's headers), and librccl.so.1 with the HIP and
# HSA runtimes and the ROCm SMI library it links to into $rccl_dir, which
# no search path names: package rccl's tier-1 tests load HIP and RCCL from
# there. A 0.38 GB download (librccl1 is 0.37 GB), about 40 s.
rccl_packages="librccl1 librccl-dev libamdhip64-7 libhsa-runtime64-1 librocm-smi64-7"
rccl_dir=/opt/rocm-go-rccl/lib
# The stamp names what the root holds: change the recipe, rebuild the root.
stamp="recipe 4: sid minbase + $packages + non-free libnvrtc12 + $cuda_headers + experimental $rccl_packages unpacked"
apt_opts=(-o Acquire::Check-Valid-Until=false -o Acquire::Retries=3)

if [ -f "$env_dir/.rocm-go-ready" ] && [ "$(cat "$env_dir/.rocm-go-ready")" = "$stamp" ]; then
	echo "rocm-env: $env_dir is ready"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "rocm-env: building the tier-1 environment needs root (debootstrap and chroot); run make test as root once" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null; then
	echo "rocm-env: installing debootstrap"
	apt-get "${apt_opts[@]}" update -qq
	DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq debootstrap >/dev/null
fi

partial="$env_dir.partial"
rm -rf "$partial" "$env_dir"
mkdir -p "$(dirname "$env_dir")"
start=$(date +%s)
echo "rocm-env: debootstrap sid into $partial (about 25 s)"
debootstrap --variant=minbase sid "$partial" "$mirror" >"$partial.log" 2>&1 || {
	tail -20 "$partial.log" >&2
	exit 1
}
echo "rocm-env: installing $packages (about 60 s, 5.5 GB)"
chroot "$partial" /bin/sh -c "apt-get ${apt_opts[*]} update -qq && DEBIAN_FRONTEND=noninteractive apt-get ${apt_opts[*]} install -y -qq --no-install-recommends $packages" \
	>>"$partial.log" 2>&1 || {
	tail -20 "$partial.log" >&2
	exit 1
}
echo "rocm-env: installing NVRTC 12 and $(echo $cuda_headers | wc -w) CUDA headers from non-free (a 0.9 GB download, about 40 s)"
echo "deb $mirror sid non-free" >"$partial/etc/apt/sources.list.d/non-free.list"
mkdir -p "$partial/var/cache/rocm-go-cuda" "$partial/usr/local/cuda/include"
chroot "$partial" /bin/sh -c "apt-get ${apt_opts[*]} update -qq && DEBIAN_FRONTEND=noninteractive apt-get ${apt_opts[*]} install -y -qq --no-install-recommends libnvrtc12 &&
	cd /var/cache/rocm-go-cuda && apt-get ${apt_opts[*]} download -qq nvidia-cuda-dev" >>"$partial.log" 2>&1 || {
	tail -20 "$partial.log" >&2
	exit 1
}
members=()
for h in $cuda_headers; do members+=("./usr/include/$h"); done
dpkg-deb --fsys-tarfile "$partial"/var/cache/rocm-go-cuda/nvidia-cuda-dev_*.deb |
	tar -x -C "$partial/usr/local/cuda/include" --strip-components=3 "${members[@]}"
rm -rf "$partial/var/cache/rocm-go-cuda"
for h in $cuda_headers; do
	[ -f "$partial/usr/local/cuda/include/$h" ] || {
		echo "rocm-env: nvidia-cuda-dev has no usr/include/$h" >&2
		exit 1
	}
done
echo "rocm-env: unpacking RCCL 7.2.4 from experimental (a 0.38 GB download, about 40 s)"
echo "deb $mirror experimental main" >"$partial/etc/apt/sources.list.d/experimental.list"
mkdir -p "$partial/var/cache/rocm-go-rccl"
chroot "$partial" /bin/sh -c "apt-get ${apt_opts[*]} update -qq &&
	cd /var/cache/rocm-go-rccl && apt-get ${apt_opts[*]} download -qq $(printf '%s/experimental ' $rccl_packages)" >>"$partial.log" 2>&1 || {
	tail -20 "$partial.log" >&2
	exit 1
}
rm "$partial/etc/apt/sources.list.d/experimental.list"
chroot "$partial" apt-get "${apt_opts[@]}" update -qq >>"$partial.log" 2>&1
unpacked="$partial/var/cache/rocm-go-rccl/root"
for deb in "$partial"/var/cache/rocm-go-rccl/*.deb; do
	dpkg-deb -x "$deb" "$unpacked"
done
mkdir -p "$partial$rccl_dir" "$partial/usr/include/rccl"
cp -a "$unpacked"/usr/lib/x86_64-linux-gnu/lib{rccl,amdhip64,hsa-runtime64,rocm_smi64}.so* "$partial$rccl_dir"/
cp -a "$unpacked"/usr/include/rccl/rccl.h "$partial/usr/include/rccl/"
rm -rf "$partial/var/cache/rocm-go-rccl"
for f in librccl.so.1 libamdhip64.so.7 libhsa-runtime64.so.1 librocm_smi64.so.7; do
	[ -e "$partial$rccl_dir/$f" ] || {
		echo "rocm-env: the RCCL packages have no $f" >&2
		exit 1
	}
done
chroot "$partial" apt-get clean
echo "$stamp" >"$partial/.rocm-go-ready"
mv "$partial" "$env_dir"
rm -f "$partial.log"
echo "rocm-env: ready in $(($(date +%s) - start)) s, $(du -sh "$env_dir" | cut -f1) at $env_dir"
