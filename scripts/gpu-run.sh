#!/usr/bin/env bash
# Runs tier 2 on a GPU machine without Go, from what `make gpu-test` built:
#
#   tar -xJf gpu.tar.xz && gpu/run.sh -platform nvidia     # or -platform amd
#   gpu/run.sh [-platform amd|nvidia] [-run REGEXP] [-j N] [-timeout D] [-v]
#
# First it compiles every kernel module for this machine's GPUs into the
# kernel cache the tests share (bin/rocm-go-kernels -arch auto: about a
# minute of NVRTC on a fresh machine, once, instead of in every package).
# Then it runs units, -j at a time (default 6; the GPU is shared, the CPU
# references want cores): a unit is a package's test binary, a shard of the
# largest packages' tests, or a -race binary's tests (raceUnits), each with
# ROCM_GO_TIER=2, so that a test that cannot reach the GPU fails instead of
# skipping, and its log in gpu/<pkg>/<unit>.log. It prints a line per
# package, and last
#
#   tier 2 on nvidia: N passed, N failed, N skipped in M s
#
# A unit that crashes or runs past -timeout (default 8m) counts as a
# failure and its log's end is shown; the exit status is 1 on any failure.
# The tests that measure the whole device run last, alone (aloneUnits).
# -run REGEXP runs the matching tests of every package, unsharded.
set -uo pipefail
cd "$(dirname "$0")"
platform=${HIP_PLATFORM:-}
run=
maxJobs=6
timeout=8m
verbose=
usage() { echo "usage: run.sh [-platform amd|nvidia] [-run REGEXP] [-j N] [-timeout D] [-v]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	-platform) platform=${2:-}; shift 2 || usage ;;
	-run) run=${2:-}; shift 2 || usage ;;
	-j) maxJobs=${2:-}; shift 2 || usage ;;
	-timeout) timeout=${2:-}; shift 2 || usage ;;
	-v) verbose=1; shift ;;
	*) usage ;;
	esac
done
[[ $maxJobs =~ ^[1-9][0-9]*$ ]] || usage
case "$timeout" in
*m) limit=$((${timeout%m} * 60)) ;;
*s) limit=${timeout%s} ;;
*) usage ;;
esac
[[ $limit =~ ^[0-9]+$ ]] || usage
export HIP_PLATFORM=$platform ROCM_GO_TIER=${ROCM_GO_TIER:-2}
start=$(date +%s)

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

# shards splits the largest packages' tests into that many units (their
# tests dealt out in turn); "each" makes a unit of every test.
declare -A shards=([candle]=6 [flashattn]=3 [candle_models_llama]=2 [rocblas]=2 [internal_bench]=each)
# raceUnits: the tests that run again from a package's -race binary (built
# by gpu-build.sh): the goroutines of the pinned upload and of the worker.
declare -A raceUnits=([candle]='^(TestGPULoad|TestGPUCopyFromPinned)$' [candle_gguf]='^TestGPU' [candle_safetensors]='^TestGPU'
	[examples_llm-worker]='^TestGPU' [examples_sd-worker]='^TestGPU')
# aloneUnits: the tests that measure the whole device (its free memory) and
# so run by themselves, one after another, once the other units are done;
# the other units skip them.
declare -A aloneUnits=([candle]='^TestGPUMemoryStaysFlat$')

if [ -x bin/rocm-go-kernels ] && [ -z "$run" ]; then
	w=$(date +%s)
	if out=$(bin/rocm-go-kernels -arch auto 2>&1); then
		echo "kernel cache: $(echo "$out" | tail -1) ($(($(date +%s) - w)) s)"
	else
		echo "kernel cache: not filled ahead, each package compiles what it needs: $(echo "$out" | tail -3)"
	fi
fi

# units: "pkg|binary|name|regexp", largest first.
units=()
add() { units+=("$1|$2|$3|$4"); }
order=(candle flashattn internal_bench candle_models_llama candle_nn rocblas miopen)
pkgs=()
for p in "${order[@]}"; do [ -x "$p/$p.test" ] && pkgs+=("$p"); done
for d in */; do
	p=${d%/}
	[ -x "$p/$p.test" ] && [[ " ${order[*]} " != *" $p "* ]] && pkgs+=("$p")
done
for p in "${pkgs[@]}"; do
	if [ -n "$run" ] || [ -z "${shards[$p]:-}" ]; then
		add "$p" "$p.test" "$p" "${run:-.}"
		continue
	fi
	mapfile -t names < <(cd "$p" && "./$p.test" -test.list '.*' 2>/dev/null | grep -E '^(Test|Example|Fuzz)')
	k=${shards[$p]}
	[ "$k" = each ] && k=${#names[@]}
	((k > ${#names[@]})) && k=${#names[@]}
	((k < 1)) && k=1
	for ((s = 0; s < k; s++)); do
		re=
		for ((i = s; i < ${#names[@]}; i += k)); do re+="${re:+|}${names[i]}"; done
		[ -n "$re" ] || re=.
		[ "$re" = . ] || re="^($re)\$"
		add "$p" "$p.test" "$p.$s" "$re"
	done
done
if [ -z "$run" ]; then
	for p in "${pkgs[@]}"; do
		[ -n "${raceUnits[$p]:-}" ] && [ -x "$p/$p.race.test" ] && add "$p" "$p.race.test" "$p.race" "${raceUnits[$p]}"
	done
fi

# Each unit leaves <unit>.log and <unit>.rc (its exit status) beside its
# binary.
runUnit() {
	local p=$1 bin=$2 name=$3 re=$4 skip=$5
	local t0
	t0=$(date +%s)
	(cd "$p" && exec timeout -k 10 $((limit + 30)) "./$bin" -test.v -test.count=1 -test.timeout="$timeout" -test.run "$re" ${skip:+-test.skip "$skip"}) >"$p/$name.log" 2>&1
	echo "$? $t0 $(date +%s)" >"$p/$name.rc"
}
alone=0
if [ -z "$run" ]; then
	for p in "${pkgs[@]}"; do [ -n "${aloneUnits[$p]:-}" ] && alone=$((alone + 1)); done
fi
echo "tier 2: ${#units[@]} units of ${#pkgs[@]} packages, $maxJobs at a time$( ((alone > 0)) && echo ", then $alone alone")"
for u in "${units[@]}"; do
	IFS='|' read -r p bin name re <<<"$u"
	rm -f "$p/$name.log" "$p/$name.rc"
	while (($(jobs -rp | wc -l) >= maxJobs)); do wait -n; done
	skip=
	[ -z "$run" ] && skip=${aloneUnits[$p]:-}
	runUnit "$p" "$bin" "$name" "$re" "$skip" &
done
wait
if [ -z "$run" ]; then
	for p in "${pkgs[@]}"; do
		[ -n "${aloneUnits[$p]:-}" ] || continue
		add "$p" "$p.test" "$p.alone" "${aloneUnits[$p]}"
		runUnit "$p" "$p.test" "$p.alone" "${aloneUnits[$p]}" ""
	done
fi

count() {
	local c
	c=$(grep -c -- "--- $1" "$2" 2>/dev/null)
	echo "${c:-0}"
}
passed=0 failed=0 skipped=0 bad=()
for p in "${pkgs[@]}"; do
	pp=0 pf=0 ps=0 first= last= n=0 report=
	for u in "${units[@]}"; do
		IFS='|' read -r up bin name re <<<"$u"
		[ "$up" = "$p" ] || continue
		log=$p/$name.log
		read -r rc t0 t1 <"$p/$name.rc" 2>/dev/null || { rc=1 t0=$start t1=$start; }
		f=$(count FAIL "$log")
		((rc != 0 && f == 0)) && f=1 # a crash or a timeout
		pp=$((pp + $(count PASS "$log"))) pf=$((pf + f)) ps=$((ps + $(count SKIP "$log"))) n=$((n + 1))
		first=$((first == 0 || t0 < first ? t0 : first)) last=$((t1 > last ? t1 : last))
		if ((f > 0)); then
			report+=$'\n'"== $name (exit $rc)"$'\n'"$(grep -B30 -A2 -- '--- FAIL' "$log" | head -80)"
			((rc != 0)) && report+=$'\n'"$(tail -20 "$log")"
		elif [ -n "$verbose" ]; then
			report+=$'\n'"$(cat "$log")"
		fi
	done
	printf '%-28s %5d passed %3d failed %3d skipped %4ds  (%d unit%s)\n' "$p" "$pp" "$pf" "$ps" $((last - first)) "$n" "$([ "$n" = 1 ] || echo s)"
	[ -n "$report" ] && echo "$report"
	passed=$((passed + pp)) failed=$((failed + pf)) skipped=$((skipped + ps))
	((pf > 0)) && bad+=("$p")
done
echo "tier 2 on ${platform:-auto}: $passed passed, $failed failed, $skipped skipped in $(($(date +%s) - start)) s${bad:+ (failed: ${bad[*]})}"
((failed == 0))
