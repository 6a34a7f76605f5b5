"""Reference logits and greedy generations from Hugging Face transformers.

Run by TestGPUAgainstTransformers: python3 transformers_ref.py OUT_DIR

For each family (a Llama with llama3 RoPE scaling, a Mistral with a sliding
window shorter than the prompt, a Qwen2 with its QKV biases and tied
embeddings) it builds a small model with seeded random weights, saves it with
save_pretrained (safetensors, float32) into OUT_DIR/<name>, runs a prompt of
40 tokens in float32 and in bfloat16 (eager attention, on the CPU unless
REF_DEVICE says otherwise), and writes beside the model:
  ref.json          the prompt, 64 greedy tokens (float32), sizes, versions
  logits_f32.bin    the prompt's logits, float32 little-endian (40, vocab)
  logits_bf16.bin   the same from the bfloat16 model, as float32
"""

import inspect
import json
import math
import os
import struct
import sys

import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

PROMPT = 40
GREEDY = 64


def rope_kwargs(cls, theta, scaling):
    """rope_parameters (transformers 5) or rope_theta and rope_scaling (4)."""
    fields = set(getattr(cls, "__dataclass_fields__", {})) | set(inspect.signature(cls.__init__).parameters)
    if "rope_parameters" in fields:
        params = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            params.update(scaling)
        return {"rope_parameters": params}
    kw = {"rope_theta": theta}
    if scaling:
        kw["rope_scaling"] = scaling
    return kw


def models():
    common = dict(vocab_size=320, hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=1024,
                  attn_implementation="eager")
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 64}
    yield "llama", 1, LlamaForCausalLM, LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=False, **rope_kwargs(LlamaConfig, 500000.0, llama3), **common)
    yield "mistral", 2, MistralForCausalLM, MistralConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, sliding_window=8, tie_word_embeddings=False, **rope_kwargs(MistralConfig, 10000.0, None), **common)
    yield "qwen2", 3, Qwen2ForCausalLM, Qwen2Config(
        hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=True, **rope_kwargs(Qwen2Config, 1000000.0, None), **common)


def init_(model, seed):
    """Weights whose logits spread over a few units, so that greedy choices
    are not near ties: projections N(0, 1/fan_in), embeddings N(0, 4/hidden),
    norms 1 + N(0, 0.01), biases N(0, 0.01)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * r)
            elif name.endswith(".bias"):
                p.copy_(0.1 * r)
            elif "embed_tokens" in name:
                p.copy_(r * 2 / math.sqrt(p.shape[1]))
            else:
                p.copy_(r / math.sqrt(p.shape[1]))


def main():
    out = sys.argv[1]
    dev = torch.device(os.environ.get("REF_DEVICE", "cpu"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name, seed, cls, cfg in models():
        torch.manual_seed(seed)
        model = cls(cfg).to(torch.float32)
        init_(model, seed)
        model.eval()
        path = os.path.join(out, name)
        model.save_pretrained(path)  # safetensors, the default
        g = torch.Generator().manual_seed(100 + seed)
        prompt = torch.randint(0, cfg.vocab_size, (1, PROMPT), generator=g)
        model = model.to(dev)
        with torch.no_grad():
            f32 = model(prompt.to(dev)).logits[0].float().cpu()
            seq = prompt[0].tolist()
            greedy = []
            for _ in range(GREEDY):
                logits = model(torch.tensor([seq], device=dev)).logits[0, -1]
                t = int(torch.argmax(logits))
                greedy.append(t)
                seq.append(t)
            bf16 = model.to(torch.bfloat16)(prompt.to(dev)).logits[0].float().cpu()
        for fname, t in (("logits_f32.bin", f32), ("logits_bf16.bin", bf16)):
            v = t.flatten().tolist()
            with open(os.path.join(path, fname), "wb") as f:
                f.write(struct.pack("<%df" % len(v), *v))
        with open(os.path.join(path, "ref.json"), "w") as f:
            json.dump({"prompt": prompt[0].tolist(), "greedy": greedy, "vocab": cfg.vocab_size,
                       "torch": torch.__version__, "transformers": transformers.__version__, "device": str(dev)}, f)
        print(f"{name}: {PROMPT} prompt tokens, {GREEDY} greedy tokens, saved in {path}")


if __name__ == "__main__":
    main()
