# rocm-go. The README's two commands:
#   make test   tier 0 (go test -race ./...) and tier 1 (the real ROCm 6.4
#               userspace in a cached Debian sid root; root needed once)
#   make demo   the flagship example: the GPUs, then an LLM worker serving a
#               small model on the GPU (else the CPU) and one streamed chat
#   make demo-sd  the image worker serving a tiny Stable Diffusion model on
#               the GPU (else the CPU) and one image through OpenAI's API
# and for developers:
#   make generate   regenerate the z* bindings from the ROCm headers
#   make gpu-test   build what tier 2 runs into gpu/ and gpu.tar.xz, for a GPU machine
#   make rocm-env   build the tier-1 environment (make test does it)

SHELL := /bin/bash
GO ?= go
SPECS := $(wildcard */cgen.spec)
export ROCM_GO_ENV ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rocm-go/sid-rocm6.4

# An installed ROCm runs tier 1 directly; otherwise the cached sid root does.
NATIVE_ROCM := $(firstword $(wildcard $(ROCM_PATH)/lib/libamdhip64.so.* /opt/rocm/lib/libamdhip64.so.*))
ifeq ($(NATIVE_ROCM),)
IN_ROCM := scripts/in-rocm-env.sh
ROCM_ENV_DEP := rocm-env
else
IN_ROCM := env ROCM_GO_TIER=1
ROCM_ENV_DEP :=
endif

.PHONY: test lint test0 test1 rocm-env generate gpu-test demo demo-sd clean

test: lint test0 test1

lint:
	@echo "== gofmt and go vet"
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@$(GO) vet ./...

test0:
	@echo "== tier 0: go test -race ./..."
	@set -o pipefail; $(GO) test -race -count=1 -timeout 30m -json ./... | $(GO) run ./internal/cmd/testsum -tier 0

rocm-env:
	@scripts/rocm-env.sh

test1: $(ROCM_ENV_DEP)
	@echo "== tier 1: go test ./... with the real ROCm userspace ($(if $(NATIVE_ROCM),$(NATIVE_ROCM),$(ROCM_GO_ENV)))"
	@$(IN_ROCM) bash -c 'set -o pipefail; go test -count=1 -timeout 30m -json ./... | go run ./internal/cmd/testsum -tier 1'

generate: $(ROCM_ENV_DEP)
	@$(IN_ROCM) go run ./internal/cmd/cgen $(SPECS)

gpu-test:
	@scripts/gpu-build.sh

demo:
	@GO=$(GO) scripts/demo.sh

demo-sd:
	@GO=$(GO) scripts/demo-sd.sh

clean:
	rm -rf gpu
