#!/usr/bin/env bash
# Runs the tier-2 test binaries that `make gpu-test` built, on a GPU machine
# without Go: each package's binary in its own folder, with ROCM_GO_TIER=2 so
# that a test that cannot reach the GPU fails instead of skipping.
#
#   gpu/run.sh [-platform amd|nvidia] [-run REGEXP] [-v]
#
# It prints a summary line per package and last "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")"
platform=${HIP_PLATFORM:-}
run=.
verbose=
while [ $# -gt 0 ]; do
	case "$1" in
	-platform) platform=$2; shift 2 ;;
	-run) run=$2; shift 2 ;;
	-v) verbose=1; shift ;;
	*) echo "usage: run.sh [-platform amd|nvidia] [-run REGEXP] [-v]" >&2; exit 2 ;;
	esac
done
export HIP_PLATFORM=$platform ROCM_GO_TIER=${ROCM_GO_TIER:-2}

# On NVIDIA, the CUDA libraries of a pip install (PyTorch's) are often the
# only ones: add their folders to the loader path.
if [ "$platform" = nvidia ] && command -v python3 >/dev/null; then
	extra=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = set()
for sp in site.getsitepackages():
    for lib in glob.glob(os.path.join(sp, "nvidia", "*", "lib")) + glob.glob(os.path.join(sp, "nvidia", "cu*", "lib")):
        dirs.add(lib)
print(":".join(sorted(dirs)))
PY
)
	[ -n "$extra" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$extra
fi

passed=0 failed=0 skipped=0 bad=()
for dir in */; do
	name=${dir%/}
	bin=$dir$name.test
	[ -x "$bin" ] || continue
	log=$dir/test.log
	start=$(date +%s)
	(cd "$dir" && "./$name.test" -test.v -test.count=1 -test.timeout=20m -test.run "$run") >"$log" 2>&1
	rc=$?
	p=$(grep -c -- '--- PASS' "$log")
	f=$(grep -c -- '--- FAIL' "$log")
	s=$(grep -c -- '--- SKIP' "$log")
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # a crash or a timeout
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	printf '%-28s %4d passed %3d failed %3d skipped  %3ds\n' "$name" "$p" "$f" "$s" $(($(date +%s) - start))
	if [ "$f" -gt 0 ]; then
		bad+=("$name")
		grep -B2 -A25 -- '--- FAIL' "$log" | head -80
		[ $rc -ne 0 ] && tail -20 "$log"
	elif [ -n "$verbose" ]; then
		cat "$log"
	fi
done
echo "tier 2 on ${platform:-auto}: $passed passed, $failed failed, $skipped skipped${bad:+ (failed: ${bad[*]})}"
[ "$failed" -eq 0 ]
