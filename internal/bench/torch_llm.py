#!/usr/bin/env python3
"""transformers' side of rocm-go's LLM benchmark (cmd/llmbench runs it in the
same session): the same model folder in BF16 on cuda, measured as
bench/llm.go measures candle/models/llama, with each attention implementation
transformers has here ("eager", and "sdpa" when available), and "compiled":
sdpa with a static KV cache and torch.compile, the gpt-fast recipe (a
decode loop of compiled steps, mode="reduce-overhead", i.e. CUDA graphs,
without generate()'s per-step work; prefill a forward pass compiled by
inductor for its shape). The compiled
run's warm-up (compilation) is timed apart and left out of its figures.

- prefill: one forward pass of b random prompts (use_cache, logits of the
  last token only, as generate's prefill), wall time with synchronisation,
  median of --reps;
- time to first token: model.generate(max_new_tokens=1) of one prompt, greedy;
- greedy decode: model.generate(do_sample=False, max_new_tokens=N,
  min_new_tokens=N) with its own KV cache; tokens/s after the first:
  b·(N−1) / (time of N tokens − time of 1 token), median of --decode-reps;
- peak memory: torch.cuda.max_memory_allocated over the runs.

Progress goes to stderr; one JSON object is printed on the last line.

    python3 torch_llm.py --model DIR [--prompt 512] [--steps 128] [--batches 1,8] [--reps 5] [--decode-reps 2]
                         [--attention eager,sdpa,compiled]
"""
import inspect
import argparse
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig


def log(*a):
    print("torch_llm:", *a, file=sys.stderr, flush=True)


def timed(f):
    torch.cuda.synchronize()
    start = time.perf_counter()
    f()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def median(reps, f):
    # Warm up for 0.2 s at least (50 runs at most), as bench.Median: one
    # run of a few milliseconds may leave an idle GPU short of its clocks.
    start = time.perf_counter()
    for i in range(50):
        f()
        if time.perf_counter() - start >= 0.2:
            break
    return statistics.median(f() for _ in range(reps))


def measure(model, a, vocab):
    # Greedy, whatever generation_config.json says (the random models' asks
    # for sampling); no end-of-sequence id, so every run makes its N tokens.
    model.generation_config = GenerationConfig(do_sample=False, pad_token_id=0)
    g = torch.Generator(device="cuda").manual_seed(1)

    def prompts(b):
        return torch.randint(0, vocab, (b, a.prompt), device="cuda", generator=g)

    def forward(b):
        ids = prompts(b)
        try:
            return timed(lambda: model(input_ids=ids, use_cache=True, logits_to_keep=1))
        except TypeError:  # a transformers without logits_to_keep
            return timed(lambda: model(input_ids=ids, use_cache=True))

    def generate(b, n):
        ids = prompts(b)
        mask = torch.ones_like(ids)
        return timed(lambda: model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n))

    out = {"prefill_tok_s": {}, "decode_tok_s": {}}
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        for b in a.batches:
            t = median(a.reps, lambda: forward(b))
            out["prefill_tok_s"][str(b)] = b * a.prompt / t
            log(f"prefill of {b}×{a.prompt} tokens: {t * 1e3:.1f} ms ({b * a.prompt / t:.0f} tok/s)")
        out["ttft_s"] = median(a.reps, lambda: generate(1, 1))
        log(f"time to first token: {out['ttft_s'] * 1e3:.1f} ms")
        for b in a.batches:
            first = median(a.reps, lambda: generate(b, 1))
            full = median(a.decode_reps, lambda: generate(b, a.steps))
            rate = b * (a.steps - 1) / max(full - first, 1e-9)
            out["decode_tok_s"][str(b)] = rate
            log(f"greedy decode, batch {b}: {a.steps} tokens in {full:.2f} s, the first in {first * 1e3:.1f} ms: {rate:.1f} tok/s")
    out["peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


def static_cache(model, b, length):
    """A StaticCache for b sequences of length tokens, whatever this
    transformers' constructor takes."""
    from transformers import StaticCache
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": model.config, "max_cache_len": length}
    for name, v in (("max_batch_size", b), ("device", "cuda"), ("dtype", torch.bfloat16)):
        if name in params:
            kw[name] = v
    return StaticCache(**kw)


def decode_loop(model, cache):
    """gpt-fast's decode loop on a transformers model: the prompt's forward
    pass into the static cache, then one compiled step per token
    (fullgraph, mode="reduce-overhead": replayed as a CUDA graph), greedy,
    the token staying on the device; no generate() around it."""
    @torch.compile(fullgraph=True, mode="reduce-overhead")
    def step(tok, pos):
        logits = model(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    def run(ids, n):
        cache.reset()
        p = ids.shape[1]
        pos = torch.arange(p, device="cuda")
        logits = model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True, logits_to_keep=1).logits
        tok = logits[:, -1].argmax(-1, keepdim=True)
        for i in range(n - 1):
            tok = step(tok, pos[-1:] + 1 + i).clone()
        return tok.cpu()
    return run


def measure_compiled(model, a, vocab):
    """The gpt-fast recipe on transformers: one static cache per batch size
    (so one compilation each) and decode_loop; prefill a forward pass
    compiled by inductor for its shape. The first call of each shape
    compiles: it is timed and reported as compile_s, outside the medians."""
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    g = torch.Generator(device="cuda").manual_seed(1)
    prefill = torch.compile(lambda ids: model(input_ids=ids, use_cache=False, logits_to_keep=1).logits, fullgraph=True, dynamic=False)

    def prompts(b):
        return torch.randint(0, vocab, (b, a.prompt), device="cuda", generator=g)

    out = {"prefill_tok_s": {}, "decode_tok_s": {}, "compile_s": {}}
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        for b in a.batches:
            ids = prompts(b)
            out["compile_s"][f"prefill/{b}"] = timed(lambda: prefill(ids))
            t = median(a.reps, lambda: timed(lambda: prefill(ids)))
            out["prefill_tok_s"][str(b)] = b * a.prompt / t
            log(f"compiled prefill of {b}×{a.prompt} tokens: {t * 1e3:.1f} ms ({b * a.prompt / t:.0f} tok/s), "
                f"compiled in {out['compile_s'][f'prefill/{b}']:.1f} s")
        one = prompts(1)
        out["ttft_s"] = median(a.reps, lambda: timed(lambda: prefill(one).argmax(-1).item()))
        log(f"compiled time to first token: {out['ttft_s'] * 1e3:.1f} ms")
        for b in a.batches:
            cache = static_cache(model, b, a.prompt + a.steps)
            loop = decode_loop(model, cache)
            ids = prompts(b)
            out["compile_s"][f"decode/{b}"] = timed(lambda: loop(ids, a.steps))
            first = median(a.reps, lambda: timed(lambda: loop(ids, 1)))
            full = median(a.decode_reps, lambda: timed(lambda: loop(ids, a.steps)))
            rate = b * (a.steps - 1) / max(full - first, 1e-9)
            out["decode_tok_s"][str(b)] = rate
            log(f"compiled greedy decode, batch {b}: {a.steps} tokens in {full:.2f} s, the first in {first * 1e3:.1f} ms: "
                f"{rate:.1f} tok/s (warm-up {out['compile_s'][f'decode/{b}']:.1f} s)")
            del loop, cache
    out["peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--decode-reps", type=int, default=2)
    ap.add_argument("--attention", default="eager,sdpa,compiled")
    a = ap.parse_args()
    a.batches = [int(b) for b in a.batches.split(",")]
    res = {"torch": torch.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(0),
           "runs": {}, "skipped": {}}
    for attn in a.attention.split(","):
        start = time.perf_counter()
        try:
            impl = "sdpa" if attn == "compiled" else attn
            model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, attn_implementation=impl).to("cuda").eval()
        except Exception as e:  # not available here, or not for this model: say why, go on
            log(f"{attn} attention is not available: {e}")
            res["skipped"][attn] = str(e)
            continue
        used = getattr(model.config, "_attn_implementation", attn)
        log(f"{attn}: loaded in {time.perf_counter() - start:.1f} s (attention {used})")
        try:
            fig = (measure_compiled if attn == "compiled" else measure)(model, a, model.config.vocab_size)
            fig["attention"] = used
            res["runs"][attn] = fig
        except Exception as e:  # keep the other implementation's figures
            log(f"{attn}: failed: {e!r}")
            res["skipped"][attn] = f"failed: {e!r}"
        del model
        torch.cuda.empty_cache()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
