#!/usr/bin/env python3
"""PyTorch's side of rocm-go's benchmarks (cmd/hipbench runs it in the same
session): the same work as bench.go, measured the same way (a warm-up, then
the median of several repeats). Prints one JSON object.

    python3 torch_ref.py [--small N] [--copy BYTES] [--d2d BYTES]
"""
import argparse
import json
import statistics
import time

import torch


def median(reps, f):
    f()
    return statistics.median(f() for _ in range(reps))


def per_op(ops, op):
    """Wall time per op of ops ops and the wait for them, in seconds."""
    def run():
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(ops):
            op()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / ops
    return run


def device_time(f, before=None):
    """Device time of f between two events, in seconds; before, if given,
    is queued ahead of the start event."""
    def run():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if before is not None:
            before()
        s.record()
        f()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3
    return run


_busy = []


def queued_time(f):
    """Device time of f between two events, in seconds, with a 256 MiB
    device copy queued ahead of the start event: the GPU is busy while the
    host queues f, so the host's launch time stays out of the figure (as
    when ops follow each other), and f's inputs leave the L2 cache. The Go
    side (bench.Tensors.DeviceTime, busyBytes) does the same."""
    if not _busy:
        _busy.extend([torch.ones(256 << 20, dtype=torch.uint8, device="cuda"), torch.empty(256 << 20, dtype=torch.uint8, device="cuda")])
    src, dst = _busy
    return device_time(f, before=lambda: dst.copy_(src))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=1024, help="elements of the tiny add")
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--copy", type=int, default=256 << 20, help="bytes of the pinned copies")
    ap.add_argument("--d2d", type=int, default=1 << 30, help="bytes of the device-to-device copy")
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args()
    dev = torch.device("cuda")
    out = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or torch.version.hip,
    }

    x = torch.ones(a.small, device=dev)
    y = torch.ones(a.small, device=dev)
    z = torch.empty(a.small, device=dev)
    out["tiny_add_out_s"] = median(a.reps, per_op(a.ops, lambda: torch.add(x, y, out=z)))
    out["tiny_add_s"] = median(a.reps, per_op(a.ops, lambda: x + y))

    host = torch.empty(a.copy, dtype=torch.uint8).pin_memory()
    host.copy_(torch.randint(0, 256, (a.copy,), dtype=torch.uint8))
    d = torch.empty(a.copy, dtype=torch.uint8, device=dev)
    out["h2d_s"] = median(a.reps, device_time(lambda: d.copy_(host, non_blocking=True)))
    out["d2h_s"] = median(a.reps, device_time(lambda: host.copy_(d, non_blocking=True)))
    del host, d

    src = torch.randint(0, 256, (a.d2d,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    out["d2d_s"] = median(a.reps, device_time(lambda: dst.copy_(src)))
    out.update(small=a.small, copy_bytes=a.copy, d2d_bytes=a.d2d)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
