"""Writes tiny-sd/, a tiny random Stable Diffusion 1.x folder in diffusers'
layout (model_index.json, tokenizer/, text_encoder/, unet/, vae/,
scheduler/), and golden.json: a txt2img run of it with classifier-free
guidance, computed in float64 by the reference components in diffusers'
loop: OpenAI's CLIP tokenizer and text transformer, diffusers'
UNet2DConditionModel, AutoencoderKL and EulerDiscreteScheduler.

    PYTHONPATH=diffusers/src python3 make.py CLIP/clip

The tokenizer is ../../../../tokenizer/testdata/clip's cut-down CLIP
vocabulary with its ids renumbered from 0, so that the text encoder's
embedding table stays small.
"""
import importlib.machinery
import json
import os
import shutil
import struct
import sys
import types

import torch

ftfy = types.ModuleType("ftfy")  # the prompts need none of its fixes
ftfy.fix_text, ftfy.__spec__ = (lambda s: s), importlib.machinery.ModuleSpec("ftfy", None)
sys.modules["ftfy"] = ftfy
sys.path.insert(0, sys.argv[1])
import model as clipmodel  # noqa: E402
import simple_tokenizer as st  # noqa: E402
from diffusers import EulerDiscreteScheduler  # noqa: E402
from diffusers.models import AutoencoderKL, UNet2DConditionModel  # noqa: E402

clipmodel.LayerNorm.forward = torch.nn.LayerNorm.forward
here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "tiny-sd")
shutil.rmtree(out, ignore_errors=True)
for d in ["tokenizer", "text_encoder", "unet", "vae", "scheduler"]:
    os.makedirs(os.path.join(out, d))


def save(path, sd):
    header, blobs, off = {}, [], 0
    for name, t in sd.items():
        b = t.detach().float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def randomize(params):
    with torch.no_grad():
        for n, p in params:
            if "norm" in n and n.endswith("weight") or n.startswith("ln") and n.endswith("weight"):
                p.normal_(1, 0.1)
            else:
                p.normal_(0, 0.15)
            p.copy_(p.float().double())


# The tokenizer: the cut-down vocabulary, renumbered.
clipdir = os.path.join(here, "..", "..", "..", "..", "tokenizer", "testdata", "clip")
real = json.load(open(os.path.join(clipdir, "vocab.json")))
order = sorted(real, key=lambda k: real[k])
renum = {tok: i for i, tok in enumerate(order)}
with open(os.path.join(out, "tokenizer", "vocab.json"), "w") as f:
    json.dump(renum, f, ensure_ascii=False, sort_keys=True)
shutil.copy(os.path.join(clipdir, "merges.txt"), os.path.join(out, "tokenizer", "merges.txt"))
shutil.copy(os.path.join(clipdir, "tokenizer_config.json"), os.path.join(out, "tokenizer", "tokenizer_config.json"))
tok = st.SimpleTokenizer(os.path.join(sys.argv[1], "bpe_simple_vocab_16e6.txt.gz"))
V, BOS, EOS = len(renum), renum["<|startoftext|>"], renum["<|endoftext|>"]


def window(text):
    ids = [renum[tok.decoder[i]] for i in tok.encode(text)][:75]
    return [BOS] + ids + [EOS] + [EOS] * (75 - len(ids))


# The text encoder: OpenAI's text transformer, saved in transformers' names.
H, LAYERS, HEADS, CTX = 32, 2, 4, 77
torch.manual_seed(0)
mask = torch.empty(CTX, CTX).fill_(float("-inf")).triu_(1)
tr = clipmodel.Transformer(H, LAYERS, HEADS, mask).double()
emb = torch.nn.Embedding(V, H).double()
pos = torch.nn.Parameter(torch.empty(CTX, H, dtype=torch.float64))
lnf = torch.nn.LayerNorm(H).double()
randomize(list(tr.named_parameters()) + [("emb", emb.weight), ("pos", pos)] + [("ln" + n, p) for n, p in lnf.named_parameters()])
sd = {"text_model.embeddings.token_embedding.weight": emb.weight, "text_model.embeddings.position_embedding.weight": pos}
for i, b in enumerate(tr.resblocks):
    p = f"text_model.encoder.layers.{i}."
    for j, n in enumerate("qkv"):
        sd[p + f"self_attn.{n}_proj.weight"] = b.attn.in_proj_weight[j * H:(j + 1) * H]
        sd[p + f"self_attn.{n}_proj.bias"] = b.attn.in_proj_bias[j * H:(j + 1) * H]
    sd[p + "self_attn.out_proj.weight"], sd[p + "self_attn.out_proj.bias"] = b.attn.out_proj.weight, b.attn.out_proj.bias
    sd[p + "layer_norm1.weight"], sd[p + "layer_norm1.bias"] = b.ln_1.weight, b.ln_1.bias
    sd[p + "layer_norm2.weight"], sd[p + "layer_norm2.bias"] = b.ln_2.weight, b.ln_2.bias
    sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = b.mlp.c_fc.weight, b.mlp.c_fc.bias
    sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = b.mlp.c_proj.weight, b.mlp.c_proj.bias
sd["text_model.final_layer_norm.weight"], sd["text_model.final_layer_norm.bias"] = lnf.weight, lnf.bias
save(os.path.join(out, "text_encoder", "model.safetensors"), sd)
json.dump({"architectures": ["CLIPTextModel"], "model_type": "clip_text_model", "hidden_size": H,
           "intermediate_size": 4 * H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "max_position_embeddings": CTX, "vocab_size": V, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-05,
           "projection_dim": H, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1},
          open(os.path.join(out, "text_encoder", "config.json"), "w"), indent=2)


def encode(text):
    ids = torch.tensor([window(text)])
    with torch.no_grad():
        x = (emb(ids) + pos).permute(1, 0, 2)
        return lnf(tr(x).permute(1, 0, 2))


# The UNet and the VAE.
torch.manual_seed(1)
unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                            block_out_channels=[8, 16], norm_num_groups=4, cross_attention_dim=H,
                            down_block_types=["CrossAttnDownBlock2D", "DownBlock2D"],
                            up_block_types=["UpBlock2D", "CrossAttnUpBlock2D"], attention_head_dim=1).double().eval()
randomize(unet.named_parameters())
save(os.path.join(out, "unet", "diffusion_pytorch_model.safetensors"), unet.state_dict())
json.dump(dict(unet.config, _class_name="UNet2DConditionModel"), open(os.path.join(out, "unet", "config.json"), "w"), indent=2, default=list)
torch.manual_seed(2)
vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 2,
                    up_block_types=["UpDecoderBlock2D"] * 2, block_out_channels=[8, 16], layers_per_block=1,
                    latent_channels=4, norm_num_groups=4, sample_size=16).double().eval()
randomize(vae.named_parameters())
save(os.path.join(out, "vae", "diffusion_pytorch_model.safetensors"), vae.state_dict())
json.dump(dict(vae.config, _class_name="AutoencoderKL"), open(os.path.join(out, "vae", "config.json"), "w"), indent=2, default=list)
sched = dict(_class_name="EulerDiscreteScheduler", num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
             beta_schedule="scaled_linear", steps_offset=1, set_alpha_to_one=False, clip_sample=False,
             timestep_spacing="leading", prediction_type="epsilon")
json.dump(sched, open(os.path.join(out, "scheduler", "scheduler_config.json"), "w"), indent=2)
json.dump({"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.30.0",
           "scheduler": ["diffusers", "EulerDiscreteScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
           "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
           "vae": ["diffusers", "AutoencoderKL"]}, open(os.path.join(out, "model_index.json"), "w"), indent=2)

# txt2img: 2 images of 12×16 pixels (latents 6×8), 4 Euler steps, guidance 7.5.
prompt, guidance, steps = "a photo of a cat", 7.5, 4
s = EulerDiscreteScheduler.from_config(sched)
s.set_timesteps(steps)
g = torch.Generator().manual_seed(3)
noise = torch.randn(2, 4, 6, 8, generator=g, dtype=torch.float64)
cond = torch.cat([encode("")] * 2 + [encode(prompt)] * 2)
x = noise * s.init_noise_sigma
with torch.no_grad():
    for t in s.timesteps:
        inp = s.scale_model_input(torch.cat([x] * 2), t)
        e = unet(inp, t, encoder_hidden_states=cond).sample
        u, c = e.chunk(2)
        x = s.step(u + guidance * (c - u), t, x).prev_sample.to(torch.float64)
    image = vae.decode(x / vae.config.scaling_factor).sample
json.dump({"prompt": prompt, "guidance": guidance, "steps": steps, "noise": noise.tolist(), "image": image.tolist()},
          open(os.path.join(here, "golden.json"), "w"), separators=(",", ":"))
