#!/usr/bin/env bash
# Builds what tier 2 runs on a GPU machine that has no Go toolchain, into gpu/:
#   gpu/<pkg>/<pkg>.test       the test binary of each package with GPU tests
#                              (those whose tests call testenv.Need(t, 2, ...)),
#                              with its test data (testdata/ and every file or
#                              folder beside the package's Go files)
#   gpu/<pkg>/<pkg>.race.test  the same built with -race, for the packages
#                              whose GPU paths run goroutines (raceUnits in
#                              gpu/run.sh names the tests it runs)
#   gpu/run.sh                 runs them, several at once, and prints a summary
#   gpu/bench/                 the benchmark runners of bench/cmd (PyTorch's
#                              scripts are embedded in them)
#   gpu/bin/                   the examples and the commands of cmd/
# and packs it all into gpu.tar.xz: about 30 MB, so that it travels to a GPU
# machine in one piece (xz with a 64 MiB dictionary: the binaries share most
# of their code). cgo with dlopen needs no CUDA or ROCm here.
#
#   scripts/gpu-build.sh            # or: make gpu-test
#   scripts/gpu-build.sh -no-archive
#
# Only the packages with GPU tests are built: every other package's tests
# are the same on a GPU machine as in tier 0. -race is left out elsewhere:
# tier 0 runs every package under -race, and on a GPU it multiplies the CPU
# references' time several times over (TestGPUSample: 58 s without, over six
# minutes with, on an H200).
set -euo pipefail
cd "$(dirname "$0")/.."
archive=1
case "${1:-}" in
"") ;;
-no-archive) archive= ;;
*) echo "usage: gpu-build.sh [-no-archive]" >&2; exit 2 ;;
esac
out=gpu
rm -rf "$out" gpu.tar.xz
mkdir -p "$out/bench" "$out/bin"
start=$(date +%s)
flags=(-trimpath -ldflags='-s -w')
# The packages whose GPU paths run goroutines of their own (the pipelined
# upload, the worker's server): their race-built binaries run the tests
# gpu/run.sh's raceUnits names.
race_pkgs=" candle candle/gguf candle/safetensors examples/llm-worker examples/sd-worker "

size() { du -h "$1" | cut -f1; }

n=0
for dir in $(go list -f '{{.Dir}}' ./...); do
	rel=${dir#"$PWD"}
	rel=${rel#/}
	grep -qE 'testenv\.Need\([a-z]+, 2,' "$dir"/*_test.go 2>/dev/null || continue
	name=${rel//\//_}
	dst=$out/$name
	mkdir -p "$dst"
	printf 'gpu-test: %-24s' "$rel"
	go test -c "${flags[@]}" -o "$dst/$name.test" "./$rel"
	printf ' %5s' "$(size "$dst/$name.test")"
	if [[ $race_pkgs == *" $rel "* ]]; then
		go test -c -race "${flags[@]}" -o "$dst/$name.race.test" "./$rel"
		printf '  -race %5s' "$(size "$dst/$name.race.test")"
	fi
	# What the tests read beside them: every file that is not Go, and every
	# folder that is not a package of its own (testdata/ always, with its
	# golden .go files).
	for f in "$dir"/* "$dir"/.[!.]*; do
		[ -e "$f" ] || continue
		base=$(basename "$f")
		if [ -d "$f" ]; then
			if [ "$base" = testdata ] || ! ls "$f"/*.go >/dev/null 2>&1; then
				cp -r "$f" "$dst/"
			fi
		elif [[ $base != *.go ]]; then
			cp "$f" "$dst/"
		fi
	done
	printf '  data %5s\n' "$(du -sh --exclude='*.test' "$dst" | cut -f1)"
	n=$((n + 1))
done
for cmd in bench/cmd/*/; do
	go build "${flags[@]}" -o "$out/bench/$(basename "$cmd")" "./$cmd"
done
for ex in examples/*/ cmd/*/; do
	go build "${flags[@]}" -o "$out/bin/$(basename "$ex")" "./$ex"
done
cp scripts/gpu-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
echo "gpu-test: $n packages with GPU tests, $(ls "$out/bench" | wc -w) benchmark runners and $(ls "$out/bin" | wc -w) programs in $out/ ($(du -sh "$out" | cut -f1)) in $(($(date +%s) - start)) s"
if [ -n "$archive" ]; then
	astart=$(date +%s)
	# xz's 64 MiB window finds each binary's code in the ones before it.
	echo "gpu-test: packing gpu/ into gpu.tar.xz (xz -9: a few minutes on two cores)"
	tar -cf - "$out" | xz -9 -T0 >gpu.tar.xz
	echo "gpu-test: packed into gpu.tar.xz ($(size gpu.tar.xz)) in $(($(date +%s) - astart)) s"
fi
echo "gpu-test: on the GPU machine: tar -xJf gpu.tar.xz && gpu/run.sh -platform nvidia   (or amd)"
