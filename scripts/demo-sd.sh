#!/usr/bin/env bash
# make demo-sd: the image worker on this machine's GPU (else the CPU)
# serving a Stable Diffusion model that rocm-go-mkmodel writes (tiny, random
# weights: the image is coloured noise), one image asked through OpenAI's
# images API with its progress drawn, the PNG written, its speed printed.
# Set ROCM_GO_DEMO_SD_MODEL to a diffusers folder or a single-file
# checkpoint to serve that instead, and ROCM_GO_DEMO_SD_SIZE and _STEPS to
# ask for another size or step count.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rocm-go
bin=$cache/demo-bin
model=${ROCM_GO_DEMO_SD_MODEL:-$cache/demo-sd-model}
port=${ROCM_GO_DEMO_SD_PORT:-18081}
out=${ROCM_GO_DEMO_SD_OUT:-$cache/demo-sd.png}
size=${ROCM_GO_DEMO_SD_SIZE:-}
# The tiny model's own size is 16×16: ask it for 32×32.
[ -n "${ROCM_GO_DEMO_SD_MODEL:-}" ] || size=${size:-32x32}
steps=${ROCM_GO_DEMO_SD_STEPS:-20}
mkdir -p "$bin"

echo "== building the image worker and its client"
$GO build -o "$bin/sd-worker" ./examples/sd-worker
$GO build -o "$bin/sd-client" ./examples/sd-client
if [ -z "${ROCM_GO_DEMO_SD_MODEL:-}" ] && [ ! -f "$model/model_index.json" ]; then
	echo "== writing a tiny random-weight Stable Diffusion model to $model"
	$GO run ./cmd/rocm-go-mkmodel -sd tiny -out "$model"
fi
echo "== starting the worker on 127.0.0.1:$port"
"$bin/sd-worker" -worker-id demo-sd -model-path "$model" -device auto -host 127.0.0.1 -port "$port" &
worker=$!
trap 'kill $worker 2>/dev/null || true' EXIT
"$bin/sd-client" -url "http://127.0.0.1:$port" -wait 10m -steps "$steps" ${size:+-size "$size"} -seed 42 -out "$out" \
	"a lighthouse on a cliff at sunset, oil painting"
echo "== stopping the worker"
kill -TERM $worker
wait $worker || true
trap - EXIT
