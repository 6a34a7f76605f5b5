#!/usr/bin/env bash
# Runs a command inside the tier-1 environment (scripts/rocm-env.sh), with the
# repository, the Go toolchain and the module cache at their usual paths. The
# mounts live in a private mount namespace and vanish with the command.
#
#   scripts/in-rocm-env.sh go test ./...
set -euo pipefail

env_dir=${ROCM_GO_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rocm-go/sid-rocm6.4}
repo=$(cd "$(dirname "$0")/.." && pwd)
goroot=$(go env GOROOT)
gomodcache=$(go env GOMODCACHE)
# A build cache of its own: the root's compiler differs from the host's.
gocache="$(dirname "$env_dir")/gocache-tier1"
mkdir -p "$gocache" "$gomodcache"

if [ ! -f "$env_dir/.rocm-go-ready" ]; then
	echo "in-rocm-env: no environment at $env_dir: run make rocm-env" >&2
	exit 1
fi

# Quote the command for the inner shell.
cmd=$(printf '%q ' "$@")
exec unshare --mount --propagation private /bin/bash -c "
set -e
# The tmpfs first: the repository or the caches may live under /tmp.
mount -t tmpfs tmpfs '$env_dir/tmp'
mount_at() { mkdir -p \"$env_dir\$2\"; mount --bind \"\$1\" \"$env_dir\$2\"; }
mount_at '$repo' '$repo'
mount_at '$goroot' '$goroot'
mount_at '$gomodcache' '$gomodcache'
mount_at '$gocache' /root/.cache/go-build
mount_at /proc /proc
mount_at /dev /dev
cp /etc/resolv.conf '$env_dir/etc/resolv.conf' 2>/dev/null || true
exec chroot '$env_dir' /usr/bin/env -i \
	PATH='$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	HOME=/root TERM=dumb GOFLAGS=-mod=readonly GOTOOLCHAIN=local GOPROXY=off \
	GOMODCACHE='$gomodcache' GOCACHE=/root/.cache/go-build \
	ROCM_GO_TIER=\${ROCM_GO_TIER:-1} HIP_PLATFORM=\${HIP_PLATFORM:-} \
	/bin/bash -c 'cd \"\$0\" && exec \"\$@\"' '$repo' $cmd
"
