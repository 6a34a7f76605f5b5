#!/usr/bin/env bash
# Builds what tier 2 runs on a GPU machine that has no Go toolchain, into gpu/:
#   gpu/<pkg>/<pkg>.test   one test binary per package (go test -c -race),
#                          with the folders beside it that hold no Go
#   gpu/run.sh             runs them all and prints a summary
#   gpu/bench/             the benchmark runners of bench/cmd (no -race),
#                          (their PyTorch scripts are embedded)
#   gpu/bin/               the examples and the commands of cmd/
# cgo with dlopen needs no CUDA or ROCm here. With -archive it also packs
# gpu/ into gpu.tar.xz, for machines that take one file.
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu
rm -rf "$out" gpu.tar.xz
mkdir -p "$out/bench" "$out/bin"
start=$(date +%s)
ldflags='-s -w'
n=0
for pkg in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
	rel=${pkg#github.com/rocm-go/rocm}
	rel=${rel#/}
	name=${rel//\//_}
	dir=$out/$name
	mkdir -p "$dir"
	printf 'gpu-test: building %-26s' "$rel"
	go test -c -race -ldflags="$ldflags" -o "$dir/$name.test" "./$rel"
	# The folders beside the package that hold no Go (testdata, ckshim: a
	# test may compile C++ from them).
	for sub in "$rel"/*/; do
		if [ -d "$sub" ] && [ -z "$(find "$sub" -name '*.go' -print -quit)" ]; then
			cp -r "${sub%/}" "$dir/"
		fi
	done
	# Tests may read files beside them (a fake library includes a header).
	for f in "$rel"/*.h "$rel"/*.c "$rel"/*.spec; do
		[ -e "$f" ] && cp "$f" "$dir/"
	done
	printf ' %s\n' "$(du -h "$dir/$name.test" | cut -f1)"
	n=$((n + 1))
done
for cmd in bench/cmd/*/; do
	go build -ldflags="$ldflags" -o "$out/bench/$(basename "$cmd")" "./$cmd"
done

for ex in examples/*/ cmd/*/; do
	go build -ldflags="$ldflags" -o "$out/bin/$(basename "$ex")" "./$ex"
done
cp scripts/gpu-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
echo "gpu-test: $n test binaries, the benchmarks and $(ls "$out/bin" | wc -w) examples and commands in $out/ ($(du -sh "$out" | cut -f1)) in $(($(date +%s) - start)) s"
if [ "${1:-}" = -archive ]; then
	tar -cJf gpu.tar.xz "$out"
	echo "gpu-test: packed into gpu.tar.xz ($(du -h gpu.tar.xz | cut -f1))"
fi
echo "gpu-test: on the GPU machine run $out/run.sh (tests) and the runners in $out/bench (benchmarks)"
