"""Writes a tiny random CLIP text encoder in a diffusers text_encoder/
folder's form (config.json, model.safetensors in transformers' names) and
golden.json: its outputs from OpenAI's CLIP text transformer
(github.com/openai/CLIP, clip/model.py), an implementation independent of
transformers', with the weights renamed into it.

    python3 make.py CLIP/clip      # the folder holding model.py

golden.json holds, for each activation (quick_gelu: CLIP-L's, SD 1.x;
gelu: OpenCLIP-H's and bigG's, SD 2.x and XL), the last hidden state
(after the final LayerNorm), the penultimate (the last layer's input,
without it), the pooled state (the final state at each sequence's first
EOS) and its projection.
"""
import json
import os
import struct
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, sys.argv[1])
import model as clipmodel  # noqa: E402

# Its LayerNorm computes in float32 (for fp16 weights); these run in float64.
clipmodel.LayerNorm.forward = torch.nn.LayerNorm.forward

H, LAYERS, HEADS, CTX, VOCAB, PROJ = 32, 3, 4, 16, 300, 24
BOS, EOS = 298, 299

torch.manual_seed(0)
mask = torch.empty(CTX, CTX).fill_(float("-inf")).triu_(1)
tr = clipmodel.Transformer(H, LAYERS, HEADS, mask).double()
tok = torch.nn.Embedding(VOCAB, H).double()
pos = torch.nn.Parameter(torch.empty(CTX, H, dtype=torch.float64))
ln_final = torch.nn.LayerNorm(H).double()
proj = torch.empty(H, PROJ, dtype=torch.float64)
with torch.no_grad():
    for p in list(tr.parameters()) + list(tok.parameters()) + [pos] + list(ln_final.parameters()) + [proj]:
        p.normal_(0, 0.2)
    for m in list(tr.modules()) + [ln_final]:
        if isinstance(m, torch.nn.LayerNorm):
            m.weight.normal_(1, 0.1)

sd = OrderedDict()
sd["text_model.embeddings.token_embedding.weight"] = tok.weight
sd["text_model.embeddings.position_embedding.weight"] = pos
for i, b in enumerate(tr.resblocks):
    p = f"text_model.encoder.layers.{i}."
    for j, n in enumerate("qkv"):
        sd[p + f"self_attn.{n}_proj.weight"] = b.attn.in_proj_weight[j * H:(j + 1) * H]
        sd[p + f"self_attn.{n}_proj.bias"] = b.attn.in_proj_bias[j * H:(j + 1) * H]
    sd[p + "self_attn.out_proj.weight"] = b.attn.out_proj.weight
    sd[p + "self_attn.out_proj.bias"] = b.attn.out_proj.bias
    sd[p + "layer_norm1.weight"], sd[p + "layer_norm1.bias"] = b.ln_1.weight, b.ln_1.bias
    sd[p + "layer_norm2.weight"], sd[p + "layer_norm2.bias"] = b.ln_2.weight, b.ln_2.bias
    sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = b.mlp.c_fc.weight, b.mlp.c_fc.bias
    sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = b.mlp.c_proj.weight, b.mlp.c_proj.bias
sd["text_model.final_layer_norm.weight"], sd["text_model.final_layer_norm.bias"] = ln_final.weight, ln_final.bias
sd["text_projection.weight"] = proj.t()

here = os.path.dirname(os.path.abspath(__file__))
# safetensors, written by hand: an 8-byte header size, the JSON header,
# the tensors' bytes (F32, little-endian).
header, blobs, off = {}, [], 0
for name, t in sd.items():
    b = t.detach().float().contiguous().numpy().tobytes()
    header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(here, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with open(os.path.join(here, "config.json"), "w") as f:
    json.dump({"architectures": ["CLIPTextModelWithProjection"], "model_type": "clip_text_model",
               "hidden_size": H, "intermediate_size": 4 * H, "num_hidden_layers": LAYERS,
               "num_attention_heads": HEADS, "max_position_embeddings": CTX, "vocab_size": VOCAB,
               "hidden_act": "quick_gelu", "layer_norm_eps": 1e-05, "projection_dim": PROJ,
               "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1, "torch_dtype": "float32"}, f, indent=2)

# Two windows: padded with EOS (SD 1.x's tokenizer) and with id 0 (SD 2.x's).
ids = torch.tensor([[BOS, 5, 17, 200, 42, EOS] + [EOS] * (CTX - 6),
                    [BOS] + list(range(100, 110)) + [EOS] + [0] * (CTX - 12)])

def run(act):
    for b in tr.resblocks:
        b.mlp.gelu = clipmodel.QuickGELU() if act == "quick_gelu" else torch.nn.GELU()
    with torch.no_grad():
        x = tok(ids) + pos
        x = x.permute(1, 0, 2)  # NLD -> LND
        pen = tr.resblocks[:-1](x)
        last = tr.resblocks[-1](pen)
        pen, last = pen.permute(1, 0, 2), last.permute(1, 0, 2)
        last = ln_final(last)
        pooled = last[torch.arange(last.shape[0]), ids.argmax(dim=-1)]
        return {"last_hidden": last.tolist(), "penultimate": pen.tolist(), "pooled": pooled.tolist(),
                "projected": (pooled @ proj).tolist()}


# Round the weights to float32, as the file holds them, before computing.
with torch.no_grad():
    for t in list(tr.parameters()) + list(tok.parameters()) + [pos] + list(ln_final.parameters()) + [proj]:
        t.copy_(t.float().double())
golden = {"ids": ids.tolist(), "quick_gelu": run("quick_gelu"), "gelu": run("gelu")}
with open(os.path.join(here, "golden.json"), "w") as f:
    json.dump(golden, f, separators=(",", ":"))
