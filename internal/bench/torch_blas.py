#!/usr/bin/env python3
"""PyTorch's side of rocm-go's BLAS benchmarks (cmd/blasbench runs it in the
same session): the same products as bench/blas.go, measured the same way
(device time between events over several calls, a warm-up, the median of
several repeats, inputs rotated when one set fits in the L2 cache), with
PyTorch's default settings (no TF32 for float32). Prints one JSON object.

    python3 torch_blas.py [--shapes bf16:8192:8192:8192:1,...] [--iters N] [--reps N]
"""
import argparse
import json
import statistics

import torch

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def device_time(fn, iters):
    """Device seconds per call of fn over iters calls between two events."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3 / iters


def bench(dtype, m, n, k, batch, iters, reps, l2):
    dt = DTYPES[dtype]
    dev = torch.device("cuda")
    size = torch.finfo(dt).bits // 8
    set_bytes = (m * k + k * n) * batch * size
    nsets = 1
    if set_bytes < 2 * l2:
        nsets = min(64, 1 + (4 * l2) // set_bytes)
    shape_a = (batch, m, k) if batch > 1 else (m, k)
    shape_b = (batch, k, n) if batch > 1 else (k, n)
    # Uniform in [-1, 1): never zeros.
    sets = [(torch.rand(shape_a, device=dev, dtype=dt) * 2 - 1, torch.rand(shape_b, device=dev, dtype=dt) * 2 - 1)
            for _ in range(nsets)]
    out = torch.empty((batch, m, n) if batch > 1 else (m, n), device=dev, dtype=dt)
    mm = torch.bmm if batch > 1 else torch.matmul
    state = {"i": 0}

    def call():
        a, b = sets[state["i"]]
        state["i"] = (state["i"] + 1) % nsets
        mm(a, b, out=out)

    call()
    torch.cuda.synchronize()
    device_time(call, iters)  # warm-up
    secs = statistics.median(device_time(call, iters) for _ in range(reps))
    flop = 2.0 * m * n * k * batch
    return {"s": secs, "tflops": flop / secs / 1e12, "sets": nsets}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="bf16:8192:8192:8192:1,f16:8192:8192:8192:1,f32:8192:8192:8192:1,f16:128:128:128:32",
                    help="comma-separated dtype:m:n:k:batch")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    out = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or torch.version.hip,
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "l2": l2,
        "shapes": {},
    }
    for spec in a.shapes.split(","):
        dtype, m, n, k, batch = spec.split(":")
        iters = a.iters if int(batch) * int(m) * int(n) * int(k) > 1 << 30 else a.iters * 50
        out["shapes"][spec] = bench(dtype, int(m), int(n), int(k), int(batch), iters, a.reps, l2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
