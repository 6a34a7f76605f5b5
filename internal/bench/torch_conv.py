#!/usr/bin/env python3
"""PyTorch's side of rocm-go's convolution benchmarks (cmd/convbench runs it
in the same session): the same half-precision convolutions as bench/conv.go,
measured the same way. cudnn.benchmark is on, as rocm-go runs a Find; the
inputs and outputs rotate among three sets, as on rocm-go's side; each figure
is the median of several repeats of `iters` convolutions between two events,
after a warm-up. Prints one JSON object.

    python3 torch_conv.py --shapes '[{"name": ..., "n": 8, "c": 320, ...}]'
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

SETS = 3


def measure(shape, channels_last, iters, reps):
    dev = torch.device("cuda")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    n, c, h, w = shape["n"], shape["c"], shape["h"], shape["w"]
    k, r, s = shape["k"], shape["r"], shape["s"]
    pad, stride = shape["pad"], shape["stride"]

    def rand(*dims):
        return (torch.rand(*dims, device=dev, dtype=torch.float16) * 2 - 1).contiguous(memory_format=fmt)

    xs = [rand(n, c, h, w) for _ in range(SETS)]
    weight = rand(k, c, r, s)

    def conv(x):
        return F.conv2d(x, weight, padding=pad, stride=stride)

    # The first call of a new shape runs cuDNN's search (cudnn.benchmark).
    torch.cuda.synchronize()
    start = time.perf_counter()
    y = conv(xs[0])
    torch.cuda.synchronize()
    find_s = time.perf_counter() - start
    assert y.is_contiguous(memory_format=fmt), "the output keeps the layout"

    def run():
        s_ev, e_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s_ev.record()
        for i in range(iters):
            conv(xs[i % SETS])
        e_ev.record()
        e_ev.synchronize()
        return s_ev.elapsed_time(e_ev) / 1e3 / iters

    run()
    times = [run() for _ in range(reps)]
    return {"name": shape["name"], "layout": "NHWC" if channels_last else "NCHW", "s": statistics.median(times), "find_s": find_s}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="JSON list of shapes (name, n, c, h, w, k, r, s, pad, stride)")
    ap.add_argument("--layouts", default="NCHW,NHWC")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # half data: no effect; stated for the record
    out = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or torch.version.hip,
        "cudnn": torch.backends.cudnn.version(),
        "results": [],
    }
    for shape in json.loads(a.shapes):
        for layout in a.layouts.split(","):
            out["results"].append(measure(shape, layout == "NHWC", a.iters, a.reps))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
