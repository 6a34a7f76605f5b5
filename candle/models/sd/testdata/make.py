"""Writes tiny-sd/ and tiny-sdxl/, tiny random Stable Diffusion 1.x and XL
folders in diffusers' layout (model_index.json, tokenizer/, text_encoder/,
unet/, vae/, scheduler/; XL adds tokenizer_2/ and text_encoder_2/), and
golden.json and golden-xl.json: a txt2img run of each with
classifier-free guidance, computed in float64 by the reference
components in diffusers' loops: OpenAI's CLIP tokenizer and text
transformer, diffusers' UNet2DConditionModel, AutoencoderKL and
EulerDiscreteScheduler. inpaint() adds tiny-sd-inpaint/ and
golden-inpaint.json.

    PYTHONPATH=diffusers/src python3 make.py CLIP/clip

The tokenizers are ../../../../tokenizer/testdata/clip's cut-down CLIP
vocabulary with its ids renumbered from 0, so that the text encoders'
embedding tables stay small.
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
clipdir = os.path.join(here, "..", "..", "..", "..", "tokenizer", "testdata", "clip")
real = json.load(open(os.path.join(clipdir, "vocab.json")))
renum = {t: i for i, t in enumerate(sorted(real, key=lambda k: real[k]))}
V, BOS, EOS = len(renum), renum["<|startoftext|>"], renum["<|endoftext|>"]
tok = st.SimpleTokenizer(os.path.join(sys.argv[1], "bpe_simple_vocab_16e6.txt.gz"))
SCHED = dict(_class_name="EulerDiscreteScheduler", num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
             beta_schedule="scaled_linear", steps_offset=1, set_alpha_to_one=False, clip_sample=False,
             timestep_spacing="leading", prediction_type="epsilon")


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


def tokenizer_folder(dst, pad):
    """The renumbered vocabulary, padding with pad; returns the window maker."""
    os.makedirs(dst)
    with open(os.path.join(dst, "vocab.json"), "w") as f:
        json.dump(renum, f, ensure_ascii=False, sort_keys=True)
    shutil.copy(os.path.join(clipdir, "merges.txt"), os.path.join(dst, "merges.txt"))
    cfg = json.load(open(os.path.join(clipdir, "tokenizer_config.json")))
    cfg["pad_token"] = pad
    json.dump(cfg, open(os.path.join(dst, "tokenizer_config.json"), "w"), indent=2)
    pid = renum[pad]

    def window(text):
        ids = [renum[tok.decoder[i]] for i in tok.encode(text)][:75]
        return [BOS] + ids + [EOS] + [pid] * (75 - len(ids))
    return window


def text_encoder(dst, seed, H, layers, heads, act, proj):
    """OpenAI's text transformer saved in transformers' names; returns its
    encode: (last, penultimate, projected pooled) of token windows."""
    os.makedirs(dst)
    CTX = 77
    torch.manual_seed(seed)
    mask = torch.empty(CTX, CTX).fill_(float("-inf")).triu_(1)
    tr = clipmodel.Transformer(H, layers, heads, mask).double()
    if act == "gelu":
        for b in tr.resblocks:
            b.mlp.gelu = torch.nn.GELU()
    emb = torch.nn.Embedding(V, H).double()
    pos = torch.nn.Parameter(torch.empty(CTX, H, dtype=torch.float64))
    lnf = torch.nn.LayerNorm(H).double()
    pw = torch.empty(H, proj or 1, dtype=torch.float64)
    randomize(list(tr.named_parameters()) + [("emb", emb.weight), ("pos", pos), ("proj", pw)] +
              [("ln" + n, p) for n, p in lnf.named_parameters()])
    sd = {"text_model.embeddings.token_embedding.weight": emb.weight,
          "text_model.embeddings.position_embedding.weight": pos}
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
    if proj:
        sd["text_projection.weight"] = pw.t()
    save(os.path.join(dst, "model.safetensors"), sd)
    json.dump({"architectures": ["CLIPTextModelWithProjection" if proj else "CLIPTextModel"],
               "model_type": "clip_text_model", "hidden_size": H, "intermediate_size": 4 * H,
               "num_hidden_layers": layers, "num_attention_heads": heads, "max_position_embeddings": CTX,
               "vocab_size": V, "hidden_act": act, "layer_norm_eps": 1e-05, "projection_dim": proj or H,
               "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1},
              open(os.path.join(dst, "config.json"), "w"), indent=2)

    def encode(windows):
        ids = torch.tensor(windows)
        with torch.no_grad():
            x = (emb(ids) + pos).permute(1, 0, 2)
            pen = tr.resblocks[:-1](x)
            last = lnf(tr.resblocks[-1](pen)).permute(1, 0, 2)
            pooled = last[torch.arange(last.shape[0]), ids.argmax(dim=-1)]
            return last, pen.permute(1, 0, 2), (pooled @ pw if proj else None)
    return encode


def component(dst, seed, model, name):
    os.makedirs(dst)
    torch.manual_seed(seed)
    model = model.double().eval()
    randomize(model.named_parameters())
    save(os.path.join(dst, "diffusion_pytorch_model.safetensors"), model.state_dict())
    json.dump(dict(model.config, _class_name=name), open(os.path.join(dst, "config.json"), "w"), indent=2, default=list)
    return model


def folder(name, xl):
    out = os.path.join(here, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "scheduler"))
    json.dump(SCHED, open(os.path.join(out, "scheduler", "scheduler_config.json"), "w"), indent=2)
    window = tokenizer_folder(os.path.join(out, "tokenizer"), "<|endoftext|>")
    enc = text_encoder(os.path.join(out, "text_encoder"), 0, 32, 2, 4, "quick_gelu", 0)
    kw = dict(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=[8, 16],
              norm_num_groups=4)
    index = {"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.30.0",
             "scheduler": ["diffusers", "EulerDiscreteScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
             "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
             "vae": ["diffusers", "AutoencoderKL"]}
    if xl:
        window2 = tokenizer_folder(os.path.join(out, "tokenizer_2"), "!")
        enc2 = text_encoder(os.path.join(out, "text_encoder_2"), 4, 32, 2, 4, "gelu", 16)
        kw.update(cross_attention_dim=64, down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"],
                  up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"], attention_head_dim=[1, 2],
                  transformer_layers_per_block=[1, 2], use_linear_projection=True, addition_embed_type="text_time",
                  addition_time_embed_dim=8, projection_class_embeddings_input_dim=6 * 8 + 16)
        index.update(_class_name="StableDiffusionXLPipeline", force_zeros_for_empty_prompt=True,
                     text_encoder_2=["transformers", "CLIPTextModelWithProjection"],
                     tokenizer_2=["transformers", "CLIPTokenizer"])
    else:
        kw.update(cross_attention_dim=32, down_block_types=["CrossAttnDownBlock2D", "DownBlock2D"],
                  up_block_types=["UpBlock2D", "CrossAttnUpBlock2D"], attention_head_dim=1)
    unet = component(os.path.join(out, "unet"), 1, UNet2DConditionModel(**kw), "UNet2DConditionModel")
    vae = component(os.path.join(out, "vae"), 2, AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2, block_out_channels=[8, 16], layers_per_block=1, latent_channels=4,
        norm_num_groups=4, sample_size=16), "AutoencoderKL")
    json.dump(index, open(os.path.join(out, "model_index.json"), "w"), indent=2)

    # txt2img: 2 images of 12×16 pixels (latents 6×8), 4 Euler steps, guidance 7.5.
    prompt, guidance, steps = "a photo of a cat", 7.5, 4
    s = EulerDiscreteScheduler.from_config(SCHED)
    s.set_timesteps(steps)
    g = torch.Generator().manual_seed(3)
    noise = torch.randn(2, 4, 6, 8, generator=g, dtype=torch.float64)
    added = {}
    if xl:
        # The negative prompt is None: SDXL's conditioning for it is zeros.
        pen1 = enc([window(prompt)])[1]
        _, pen2, pooled = enc2([window2(prompt)])
        c = torch.cat([pen1, pen2], dim=-1)
        cond = torch.cat([torch.zeros_like(c)] * 2 + [c] * 2)
        added = {"text_embeds": torch.cat([torch.zeros_like(pooled)] * 2 + [pooled] * 2),
                 "time_ids": torch.tensor([[12, 16, 0, 0, 12, 16]] * 4, dtype=torch.float64)}
    else:
        cond = torch.cat([enc([window("")])[0]] * 2 + [enc([window(prompt)])[0]] * 2)
    x = noise * s.init_noise_sigma
    with torch.no_grad():
        for t in s.timesteps:
            inp = s.scale_model_input(torch.cat([x] * 2), t)
            kwargs = {"added_cond_kwargs": added} if xl else {}
            e = unet(inp, t, encoder_hidden_states=cond, **kwargs).sample
            u, c = e.chunk(2)
            x = s.step(u + guidance * (c - u), t, x).prev_sample.to(torch.float64)
        image = vae.decode(x / vae.config.scaling_factor).sample
    golden = "golden-xl.json" if xl else "golden.json"
    json.dump({"prompt": prompt, "guidance": guidance, "steps": steps, "noise": noise.tolist(),
               "image": image.tolist()}, open(os.path.join(here, golden), "w"), separators=(",", ":"))
    return window, enc, unet, vae


def inpaint(window, enc, unet4, vae):
    """tiny-sd-inpaint, tiny-sd with a 9-channel UNet, and golden-inpaint.json:
    an inpainting run of it (strength 1, from noise) and one of tiny-sd's
    4-channel UNet (strength 0.75, the known region blended back each step),
    both in diffusers' StableDiffusionInpaintPipeline loop with its image
    and mask processors; and the VAE's tiled decoding and encoding of
    larger latents and images."""
    src, out = os.path.join(here, "tiny-sd"), os.path.join(here, "tiny-sd-inpaint")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for d in ["scheduler", "tokenizer", "text_encoder", "vae"]:
        shutil.copytree(os.path.join(src, d), os.path.join(out, d))
    index = json.load(open(os.path.join(src, "model_index.json")))
    index["_class_name"] = "StableDiffusionInpaintPipeline"
    json.dump(index, open(os.path.join(out, "model_index.json"), "w"), indent=2)
    unet9 = component(os.path.join(out, "unet"), 5, UNet2DConditionModel(
        sample_size=8, in_channels=9, out_channels=4, layers_per_block=1, block_out_channels=[8, 16],
        norm_num_groups=4, cross_attention_dim=32, down_block_types=["CrossAttnDownBlock2D", "DownBlock2D"],
        up_block_types=["UpBlock2D", "CrossAttnUpBlock2D"], attention_head_dim=1), "UNet2DConditionModel")

    import numpy as np
    import PIL.Image
    from diffusers.image_processor import VaeImageProcessor
    f, sf = 2, vae.config.scaling_factor
    g = torch.Generator().manual_seed(6)
    pixels = torch.randint(0, 256, (12, 16, 3), generator=g, dtype=torch.uint8)
    # The mask: white (repaint) on the right, grey just under and over the
    # 0.5 threshold, coloured so that its grey level matters.
    m = np.zeros((12, 16, 3), dtype=np.uint8)
    m[:, 7:] = (255, 255, 255)
    m[3:9, 10:14] = (127, 127, 127)
    m[0:4, 0:4] = (128, 128, 128)
    m[8:12, 0:6] = (200, 90, 150)
    m[4:8, 12:16] = (40, 200, 10)
    init_pil, mask_pil = PIL.Image.fromarray(pixels.numpy()), PIL.Image.fromarray(m)
    init = VaeImageProcessor(vae_scale_factor=f).preprocess(init_pil, height=12, width=16).double()
    mask = VaeImageProcessor(vae_scale_factor=f, do_normalize=False, do_binarize=True,
                             do_convert_grayscale=True).preprocess(mask_pil, height=12, width=16).double()
    masked = init * (mask < 0.5)
    mask_lat = torch.nn.functional.interpolate(mask, size=(12 // f, 16 // f))
    prompt, guidance, steps = "a photo of a cat", 7.5, 4
    cond = torch.cat([enc([window("")])[0], enc([window(prompt)])[0]])
    noise = torch.randn(1, 4, 6, 8, generator=g, dtype=torch.float64)
    with torch.no_grad():
        masked_lat = vae.encode(masked).latent_dist.mode() * sf
        image_lat = vae.encode(init).latent_dist.mode() * sf

        def guided(model, inp, t):
            e = model(inp, t, encoder_hidden_states=cond).sample
            u, c = e.chunk(2)
            return u + guidance * (c - u)

        # 9 channels, strength 1: the latents start from noise.
        s = EulerDiscreteScheduler.from_config(SCHED)
        s.set_timesteps(steps)
        x = noise * s.init_noise_sigma
        for t in s.timesteps:
            inp = s.scale_model_input(torch.cat([x] * 2), t)
            inp = torch.cat([inp, torch.cat([mask_lat] * 2), torch.cat([masked_lat] * 2)], dim=1)
            x = s.step(guided(unet9, inp, t), t, x).prev_sample.to(torch.float64)
        image9 = vae.decode(x / sf).sample

        # 4 channels, strength 0.75: the last 3 of 4 steps, from the image's
        # latents noised to the first, the unmasked region put back noised
        # to the next step's level after each.
        s = EulerDiscreteScheduler.from_config(SCHED)
        s.set_timesteps(steps)
        start = steps - int(steps * 0.75)
        ts = s.timesteps[start:]
        s.set_begin_index(start)
        x = s.add_noise(image_lat, noise, ts[:1])
        for i, t in enumerate(ts):
            inp = s.scale_model_input(torch.cat([x] * 2), t)
            x = s.step(guided(unet4, inp, t), t, x).prev_sample.to(torch.float64)
            proper = image_lat
            if i < len(ts) - 1:
                proper = s.add_noise(image_lat, noise, torch.tensor([ts[i + 1]]))
            x = (1 - mask_lat) * proper + mask_lat * x
        image4 = vae.decode(x / sf).sample

        # Tiled decoding: 14×20 latents in tiles of 8 (sample_size 16 over
        # the factor 2), 6 apart, blended over 4 pixels.
        z = torch.randn(1, 4, 14, 20, generator=g, dtype=torch.float64)
        vae.enable_tiling()
        tiled = vae.decode(z / sf).sample
        # Tiled encoding: 28×40 images in tiles of 16, 12 apart, their
        # latents blended over 2.
        images = torch.rand(1, 3, 28, 40, generator=g, dtype=torch.float64) * 2 - 1
        encoded = vae.encode(images).latent_dist.mode() * sf
        vae.disable_tiling()
    json.dump({"prompt": prompt, "guidance": guidance, "steps": steps, "pixels": pixels.tolist(), "mask": m.tolist(),
               "noise": noise.tolist(), "image9": image9.tolist(), "strength4": 0.75, "image4": image4.tolist(),
               "latents": z.tolist(), "tiled": tiled.tolist(),
               "images": images.tolist(), "encoded": encoded.tolist()},
              open(os.path.join(here, "golden-inpaint.json"), "w"), separators=(",", ":"))


inpaint(*folder("tiny-sd", False))
folder("tiny-sdxl", True)
