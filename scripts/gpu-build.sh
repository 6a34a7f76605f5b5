#!/usr/bin/env bash
# Builds the tier-2 test binaries, one per package (go test -c), stripped,
# into gpu/ with each package's testdata and the runner gpu/run.sh, so that
# they run on a GPU machine that has no Go toolchain. cgo with dlopen needs no
# CUDA or ROCm here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s)
n=0
for pkg in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
	rel=${pkg#github.com/rocm-go/rocm/}
	name=${rel//\//_}
	dir=$out/$name
	mkdir -p "$dir"
	printf 'gpu-test: building %-28s' "$rel"
	go test -c -ldflags='-s -w' -o "$dir/$name.test" "./$rel"
	if [ -d "$rel/testdata" ]; then
		cp -r "$rel/testdata" "$dir/testdata"
	fi
	# Tests may read sources next to them (headers a fake library includes).
	for f in "$rel"/*.h "$rel"/*.c; do
		[ -e "$f" ] && cp "$f" "$dir/"
	done
	printf ' %s\n' "$(du -h "$dir/$name.test" | cut -f1)"
	n=$((n + 1))
done
cp scripts/gpu-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
echo "gpu-test: $n test binaries in $out/ ($(du -sh "$out" | cut -f1)) in $(($(date +%s) - start)) s; run $out/run.sh on the GPU machine"
