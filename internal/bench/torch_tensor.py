#!/usr/bin/env python3
"""PyTorch's side of rocm-go's tensor benchmark (cmd/tensorbench runs it in
the same session): the same ops on the same sizes as bench/tensor.go,
measured the same way (device time between two events with a copy queued
ahead, a warm-up, the
median of several repeats; the small add as wall time per op). Prints one
JSON object keyed by the ops' names.

    python3 torch_tensor.py [--reps N] [--ops N] [--scale N] [--checkpoint FILE]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from torch_ref import median, per_op, queued_time


def rand(*shape, dtype=torch.float32):
    return torch.rand(*shape, device="cuda", dtype=dtype) * 2 - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--checkpoint", help="a safetensors file to time loading onto the GPU")
    ap.add_argument("--convs", default="[]", help="JSON list of the conv2d rows (name, n, c, h, w, k, r, s, pad, stride, nhwc)")
    ap.add_argument("--attention", default="[]", help="JSON list of the attention rows (name, dtype, b, hq, hkv, sq, s, d, causal)")
    a = ap.parse_args()
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda or torch.version.hip}

    def measure(name, op):
        out[name] = median(a.reps, queued_time(op))

    n = (256 << 20) // a.scale
    x, y = rand(n), rand(n)
    measure(f"add f32, {n >> 20}M elements", lambda: x + y)
    del x, y

    rows, cols = 4096 // a.scale, 32000
    logits = rand(rows, cols)
    measure(f"sum over the last dim, {rows}×{cols} f32", lambda: logits.sum(dim=-1))
    measure(f"argsort over the last dim, {rows}×{cols} f32", lambda: torch.argsort(logits, dim=-1))
    measure(f"argmax over the last dim, {rows}×{cols} f32", lambda: logits.argmax(dim=-1))
    del logits

    side = 8192 // a.scale
    m = rand(side, side)
    measure(f"transpose-copy f32 {side}²", lambda: m.t().contiguous())
    del m
    l, r = rand(side, side // 2), rand(side, side // 2)
    measure(f"cat of two {side}×{side // 2} f32 along dim 1", lambda: torch.cat([l, r], dim=1))
    del l, r

    vocab, hidden, nids = 32000, 4096, 16384 // a.scale
    table = rand(vocab, hidden)
    ids = torch.randint(0, vocab, (nids,), device="cuda", dtype=torch.int64)
    measure(f"index_select {nids} rows of a {vocab}×{hidden} f32 table", lambda: torch.index_select(table, 0, ids))
    del table, ids

    wn = (64 << 20) // a.scale
    mask = rand(wn) > 0
    t, f = rand(wn), rand(wn)
    measure(f"where, {wn >> 20}M f32 with a u8 mask", lambda: torch.where(mask, t, f))
    del mask, t, f

    c = rand(n)
    measure(f"cast f32→bf16, {n >> 20}M elements", lambda: c.to(torch.bfloat16))
    del c
    h = rand(n, dtype=torch.float16)
    measure(f"gelu (tanh) f16, {n >> 20}M elements", lambda: F.gelu(h, approximate="tanh"))
    measure(f"silu f16, {n >> 20}M elements", lambda: F.silu(h))
    del h

    nr, nc = 16384 // a.scale, 4096
    act = rand(nr, nc, dtype=torch.float16)
    gain, bias = rand(nc, dtype=torch.float16), rand(nc, dtype=torch.float16)
    measure(f"softmax over the last dim, {nr}×{nc} f16", lambda: torch.softmax(act, dim=-1))
    measure(f"rms_norm {nr}×{nc} f16", lambda: F.rms_norm(act, (nc,), gain, 1e-6))
    measure(f"layer_norm {nr}×{nc} f16", lambda: F.layer_norm(act, (nc,), gain, bias, 1e-5))
    del act, gain, bias
    gn = rand(2, 320, 64, 64, dtype=torch.float16)
    gnw, gnb = rand(320, dtype=torch.float16), rand(320, dtype=torch.float16)
    measure("group_norm (2, 320, 64, 64) f16, 32 groups", lambda: F.group_norm(gn, 32, gnw, gnb, 1e-5))
    measure("group_norm + silu (2, 320, 64, 64) f16, 32 groups", lambda: F.silu(F.group_norm(gn, 32, gnw, gnb, 1e-5)))
    del gn, gnw, gnb
    side = 512 // a.scale
    vn = rand(1, 512, side, side, dtype=torch.float16)
    vnw, vnb = rand(512, dtype=torch.float16), rand(512, dtype=torch.float16)
    measure(f"group_norm + silu (1, 512, {side}, {side}) f16, 32 groups", lambda: F.silu(F.group_norm(vn, 32, vnw, vnb, 1e-5)))
    del vn, vnw, vnb
    toks = 4096 // a.scale
    ff = rand(2, toks, 2560, dtype=torch.float16)

    def geglu():
        hidden, gate = ff.chunk(2, dim=-1)
        return hidden * F.gelu(gate)

    measure(f"geglu (2, {toks}, 2560) f16", geglu)
    del ff
    heads, seq, hd = 32, 4096 // a.scale, 128
    q = rand(1, heads, seq, hd, dtype=torch.float16)
    cos, sin = rand(seq, hd // 2, dtype=torch.float16), rand(seq, hd // 2, dtype=torch.float16)

    def rope():
        # The composite of Hugging Face's Llama (rotate_half): PyTorch has
        # no fused rotary op.
        x1, x2 = q[..., : hd // 2], q[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    measure(f"rope (1, {heads}, {seq}, {hd}) f16", rope)
    del q, cos, sin

    mm = 8192 // a.scale
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
        x, y = rand(mm, mm, dtype=dt), rand(mm, mm, dtype=dt)
        measure(f"matmul {mm}³ {name}", lambda: x @ y)
        del x, y
    bx, by = rand(32, 128, 128, dtype=torch.float16), rand(32, 128, 128, dtype=torch.float16)
    measure("bmm 32×128³ f16", lambda: torch.bmm(bx, by))
    del bx, by

    # The conv2d rows (bench.TensorConvs): cudnn.benchmark on, as rocm-go
    # runs a Find; channels_last for NHWC. The warm-up runs the search.
    torch.backends.cudnn.benchmark = True
    for c in json.loads(a.convs):
        fmt = torch.channels_last if c["nhwc"] else torch.contiguous_format
        x = rand(c["n"], c["c"], c["h"], c["w"], dtype=torch.float16).contiguous(memory_format=fmt)
        w = rand(c["k"], c["c"], c["r"], c["s"], dtype=torch.float16).contiguous(memory_format=fmt)
        measure(c["name"], lambda: F.conv2d(x, w, padding=c["pad"], stride=c["stride"]))
        del x, w

    # The attention rows (bench.AttentionOps): scaled_dot_product_attention
    # on (b, h, s, d) tensors with PyTorch's own choice of backend; GQA
    # through enable_gqa. Decode rows have one query and no mask.
    dts = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    for c in json.loads(a.attention):
        dt = dts[c["dtype"]]
        q = rand(c["b"], c["hq"], c["sq"], c["d"], dtype=dt)
        k, v = rand(c["b"], c["hkv"], c["s"], c["d"], dtype=dt), rand(c["b"], c["hkv"], c["s"], c["d"], dtype=dt)
        gqa = c["hq"] != c["hkv"]
        measure(c["name"], lambda: F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"], enable_gqa=gqa))
        del q, k, v

    x, y = rand(1024), rand(1024)
    z = torch.empty_like(x)
    out["tiny_add_s"] = median(a.reps, per_op(a.ops, lambda: x + y))
    out["tiny_add_out_s"] = median(a.reps, per_op(a.ops, lambda: torch.add(x, y, out=z)))

    if a.checkpoint:
        # safetensors' own loader, as Hugging Face's stack loads weights:
        # the first load in the process, then the median of three.
        from safetensors.torch import load_file

        def load():
            start = time.perf_counter()
            ts = load_file(a.checkpoint, device="cuda:0")
            torch.cuda.synchronize()
            d = time.perf_counter() - start
            del ts
            return d
        out["load_first_s"] = load()
        out["load_s"] = statistics.median(load() for _ in range(3))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
