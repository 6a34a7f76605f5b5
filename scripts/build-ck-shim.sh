#!/usr/bin/env bash
# Builds librocm_go_fmha.so, the Composable Kernel FMHA shim that package
# flashattn loads at run time on AMD GPUs (flashattn/ckshim/rocm_go_fmha.h
# is its ABI), from a Composable Kernel checkout, with hipcc.
#
#   scripts/build-ck-shim.sh CK_DIR [OUT_DIR]
#
# Inputs:
#   CK_DIR        a checkout of github.com/ROCm/composable_kernel (its
#                 include/ck_tile and example/ck_tile/01_fmha are used;
#                 written against the fmha_fwd API of late 2024, as in
#                 ROCm 6.3 and 6.4)
#   OUT_DIR       where the library and the objects go (default:
#                 build/ck-shim under the repository; the library is
#                 OUT_DIR/librocm_go_fmha.so)
# and the environment:
#   GPU_TARGETS   the GPU targets, separated by ';' or ',' (default:
#                 "gfx90a;gfx942"); the shim declines other devices, and
#                 flashattn runs its own kernels there
#   HIPCC         the compiler (default: hipcc on PATH, else
#                 $ROCM_PATH/bin/hipcc, else /opt/rocm/bin/hipcc)
#   PYTHON        Python 3 for CK's kernel generator (default: python3)
#   JOBS          parallel compiles (default: the number of CPUs)
#   CK_FMHA_FILTER  a glob over CK's kernel names, to build fewer
#                 instances (default: all of f16/bf16): for example
#                 'fmha_fwd_d128_*' builds head dim 128 only. flashattn
#                 falls back to its own kernels for the cases left out.
#   CK_FMHA_ONLY_GLUE=1  build only the shim's own C++ (no CK kernels,
#                 no library): a quick check of the sources and compiler.
#
# What it builds: CK's generator writes one .cpp per kernel instance (f16
# and bf16, head dims 32/64/128/256 with padding for every multiple of 8,
# batch and group (variable-length) mode, with and without mask, ALiBi and
# LSE; no dropout, no fp8) and a dispatcher, fmha_fwd_api.cpp; hipcc
# compiles them with the shim's two files for every target and links one
# shared library that exports the rocm_go_fmha_* functions only. Expect a
# long build: a few hundred instances of heavy templates, tens of seconds
# each per target (use many cores, or CK_FMHA_FILTER).
#
# Using it: put the library in $ROCM_PATH/lib or /opt/rocm/lib, or name it
# (file or folder) in ROCM_GO_FMHA_LIBRARY, or call flashattn.LoadCK; see
# package flashattn's godoc.
set -euo pipefail

usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; }
if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	usage >&2
	exit 2
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
shim_src="$repo/flashattn/ckshim"
ck_dir=$(cd "$1" && pwd)
out_dir=${2:-$repo/build/ck-shim}
targets=${GPU_TARGETS:-gfx90a;gfx942}
targets=${targets//,/;}
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
filter=${CK_FMHA_FILTER:-*}

fmha_dir="$ck_dir/example/ck_tile/01_fmha"
for f in "$ck_dir/include/ck_tile/ops/fmha.hpp" "$fmha_dir/generate.py" "$fmha_dir/fmha_fwd.hpp"; do
	if [ ! -f "$f" ]; then
		echo "build-ck-shim: $f is missing: CK_DIR must be a Composable Kernel checkout with ck_tile's FMHA" >&2
		exit 1
	fi
done

hipcc=${HIPCC:-}
if [ -z "$hipcc" ]; then
	for c in "$(command -v hipcc || true)" "${ROCM_PATH:-/opt/rocm}/bin/hipcc" /opt/rocm/bin/hipcc; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			hipcc=$c
			break
		fi
	done
fi
if [ -z "$hipcc" ]; then
	echo "build-ck-shim: no hipcc: install ROCm's hipcc, or set HIPCC or ROCM_PATH" >&2
	exit 1
fi

revision=$(git -C "$ck_dir" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
offload=()
IFS=';' read -ra target_list <<<"$targets"
for t in "${target_list[@]}"; do
	if [[ ! "$t" =~ ^gfx[0-9a-f]+$ ]]; then
		echo "build-ck-shim: GPU target '$t': want names like gfx942" >&2
		exit 1
	fi
	offload+=("--offload-arch=$t")
done
targets=$(IFS=';'; echo "${target_list[*]}")

# The flags of CK's own CMake build of the FMHA example (fast exp2 with
# denormals flushed), position-independent for a shared library.
flags=(-std=c++17 -O3 -fPIC -DNDEBUG "${offload[@]}"
	-I"$ck_dir/include" -I"$fmha_dir" -I"$shim_src"
	-DCK_TILE_FMHA_FWD_FAST_EXP2=1 -fgpu-flush-denormals-to-zero
	-Wno-undefined-func-template -Wno-float-equal
	"-DROCM_GO_FMHA_ARCHS=\"$targets\"" "-DROCM_GO_FMHA_CK_REVISION=\"$revision\"")

mkdir -p "$out_dir/gen" "$out_dir/obj"
echo "build-ck-shim: CK $revision, targets $targets, $hipcc, $jobs jobs, into $out_dir"

compile() { # source object
	"$hipcc" "${flags[@]}" -c "$1" -o "$2"
}

if [ "${CK_FMHA_ONLY_GLUE:-0}" = 1 ]; then
	compile "$shim_src/rocm_go_fmha.cpp" "$out_dir/obj/rocm_go_fmha.o"
	compile "$shim_src/rocm_go_fmha_ck.cpp" "$out_dir/obj/rocm_go_fmha_ck.o"
	echo "build-ck-shim: compiled the shim's own sources (CK_FMHA_ONLY_GLUE=1: no kernels, no library)"
	exit 0
fi

# CK's generator, with the filter, and without the dropout instances that
# flashattn never asks for (its filter is one glob: this wraps fnmatch).
# It writes into gen.new; files whose text did not change keep their
# objects from an earlier run with the same flags.
rm -rf "$out_dir/gen.new"
mkdir -p "$out_dir/gen.new"
CK_FMHA_DIR="$fmha_dir" CK_FMHA_OUT="$out_dir/gen.new" CK_FMHA_FILTER="$filter" "$python" - <<'PY'
import fnmatch, os, runpy, sys
match = fnmatch.fnmatch
fnmatch.fnmatch = lambda name, pat: match(name, pat) and "_dropout" not in name
d = os.environ["CK_FMHA_DIR"]
sys.path.insert(0, d)
# receipt 2: the FlashAttention integration set (f16/bf16, V row-major,
# no bias or ALiBi, no fp8).
sys.argv = ["generate.py", "--api", "fwd", "--receipt", "2", "--mask", "simplified",
            "--filter", os.environ["CK_FMHA_FILTER"], "--output_dir", os.environ["CK_FMHA_OUT"]]
runpy.run_path(os.path.join(d, "generate.py"), run_name="__main__")
PY
printf '%s\0' "${flags[@]}" >"$out_dir/gen.new/.flags"
if ! cmp -s "$out_dir/gen.new/.flags" "$out_dir/gen/.flags"; then
	rm -rf "$out_dir/gen" "$out_dir/obj"
	mkdir -p "$out_dir/gen" "$out_dir/obj"
fi
for f in "$out_dir"/gen/*.cpp; do
	if [ -e "$f" ] && [ ! -e "$out_dir/gen.new/$(basename "$f")" ]; then
		rm -f "$f" "$out_dir/obj/$(basename "${f%.cpp}").o"
	fi
done
for f in "$out_dir"/gen.new/*.cpp "$out_dir/gen.new/.flags"; do
	if ! cmp -s "$f" "$out_dir/gen/$(basename "$f")"; then
		mv "$f" "$out_dir/gen/"
	fi
done
rm -rf "$out_dir/gen.new"
compile "$shim_src/rocm_go_fmha.cpp" "$out_dir/obj/rocm_go_fmha.o"
compile "$shim_src/rocm_go_fmha_ck.cpp" "$out_dir/obj/rocm_go_fmha_ck.o"
mapfile -t blobs < <(ls "$out_dir"/gen/*.cpp)
n=$((${#blobs[@]} - 1))
if [ "$n" -le 0 ]; then
	echo "build-ck-shim: CK_FMHA_FILTER='$filter' selects no kernel" >&2
	exit 1
fi
echo "build-ck-shim: compiling $n kernel instances and the dispatcher"
export hipcc
# Arrays do not cross export: the flags come from the file gen/.flags.
printf '%s\0' "${blobs[@]}" | xargs -0 -P "$jobs" -I{} bash -c '
	src={}; obj="'"$out_dir"'/obj/$(basename "${src%.cpp}").o"
	if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
		mapfile -d "" -t fl <"'"$out_dir"'/gen/.flags"
		"$hipcc" "${fl[@]}" -c "$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj" || exit 255
	fi'

objs=("$out_dir/obj/rocm_go_fmha.o" "$out_dir/obj/rocm_go_fmha_ck.o")
for b in "${blobs[@]}"; do
	objs+=("$out_dir/obj/$(basename "${b%.cpp}").o")
done
# Export the ABI only: CK's templates stay inside.
cat >"$out_dir/obj/exports.map" <<'MAP'
{ global: rocm_go_fmha_*; local: *; };
MAP
"$hipcc" -shared -fPIC "${offload[@]}" -o "$out_dir/librocm_go_fmha.so" "${objs[@]}" \
	-Wl,--version-script="$out_dir/obj/exports.map" -Wl,-soname,librocm_go_fmha.so
echo "build-ck-shim: built $out_dir/librocm_go_fmha.so"
nm -D --defined-only "$out_dir/librocm_go_fmha.so" | grep ' T rocm_go_fmha_' || true
