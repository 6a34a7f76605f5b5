#!/usr/bin/env bash
# Builds libtrace.so (trace.c: a CUPTI kernel timeline for NVIDIA machines
# without Nsight Systems) into DIR (default gpu/trace), with steps.py beside
# it. CUPTI's headers come from Debian's libcupti-dev (sid, non-free),
# downloaded once through the tier-1 root (make rocm-env; root needed) into
# its cache; the few CUDA types they name are in include/. On the GPU
# machine:
#
#   TRACE_OUT=t.txt CUPTI_LIB=/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.<v> \
#     LD_PRELOAD=$PWD/libtrace.so ./program ...
#   python3 steps.py t.txt
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../../gpu/trace}")
cd "$(dirname "$0")"
env_dir=${ROCM_GO_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rocm-go/sid-rocm6.4}
cache="$(dirname "$env_dir")/cupti"
if [ ! -f "$cache/usr/include/cupti_activity.h" ]; then
	if [ ! -f "$env_dir/.rocm-go-ready" ]; then
		echo "trace: CUPTI's headers come through the tier-1 root: run make rocm-env first" >&2
		exit 1
	fi
	echo "trace: downloading Debian's libcupti-dev (headers, about 3 MB)"
	rm -rf "$env_dir/tmp/cupti" && mkdir -p "$env_dir/tmp/cupti"
	chroot "$env_dir" /bin/sh -c "cd /tmp/cupti && apt-get -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root download -qq libcupti-dev" >/dev/null
	rm -rf "$cache" && mkdir -p "$cache"
	dpkg-deb -x "$env_dir"/tmp/cupti/libcupti-dev_*.deb "$cache"
	rm -rf "$env_dir/tmp/cupti"
fi
mkdir -p "$out"
gcc -O2 -shared -fPIC -Wall -Iinclude -I"$cache/usr/include" -o "$out/libtrace.so" trace.c -ldl -lpthread
cp steps.py "$out/"
echo "trace: $out/libtrace.so and steps.py"
