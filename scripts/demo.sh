#!/usr/bin/env bash
# make demo: the devices, then the flagship: an LLM worker on this machine's
# GPU (else the CPU) serving a small Llama-architecture model that
# rocm-go-mkmodel writes (random weights, so the words are nonsense), one
# streamed chat request to it, and its speed. Set ROCM_GO_DEMO_MODEL to a
# Hugging Face model folder to serve that instead.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rocm-go
bin=$cache/demo-bin
model=${ROCM_GO_DEMO_MODEL:-$cache/demo-model}
port=${ROCM_GO_DEMO_PORT:-18080}
mkdir -p "$bin"

$GO run ./examples/devinfo || true
echo
echo "== building the worker and the chat client"
$GO build -o "$bin/llm-worker" ./examples/llm-worker
$GO build -o "$bin/llm-chat" ./examples/llm-chat
if [ ! -f "$model/config.json" ]; then
	echo "== writing a small random-weight model to $model"
	$GO run ./cmd/rocm-go-mkmodel -out "$model"
fi
echo "== starting the worker on 127.0.0.1:$port"
"$bin/llm-worker" -worker-id demo -model "$model" -model-ref demo -device auto -host 127.0.0.1 -port "$port" &
worker=$!
trap 'kill $worker 2>/dev/null || true' EXIT
[ -n "${ROCM_GO_DEMO_MODEL:-}" ] || echo "== the model's weights are random: its words are nonsense, and the byte tokens it draws that make no UTF-8 show as �"
"$bin/llm-chat" -url "http://127.0.0.1:$port" -wait 5m -max-tokens 64 "Tell me about GPUs in one paragraph."
echo "== stopping the worker"
kill -TERM $worker
wait $worker || true
trap - EXIT
