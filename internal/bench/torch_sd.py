#!/usr/bin/env python3
"""diffusers' side of rocm-go's Stable Diffusion benchmark (cmd/sdbench runs
it in the same session). With --make it first writes a diffusers folder of
random weights in a real model's shape (SD 1.5 or SDXL base; seeded, in
float16, tokenizers over the bytes alone as mkmodel writes them). Then:

- --ref FILE: reference outputs in float32 on cuda, TF32 off, written as
  safetensors: the prompt's token ids; the text encoders' hidden states
  (last, penultimate, XL's projected pooled state); one UNet prediction of
  seeded latents, timestep and text; one VAE decode of seeded latents; and
  a whole txt2img run (Euler, --ref-steps, guidance 7.5) from seeded
  latents at --ref-size, as 8-bit RGB values.
- --modes eager,compile: diffusers' pipeline in float16 with SDPA attention
  (eager), and with its UNet in channels_last and torch.compile'd
  (mode reduce-overhead, fullgraph; its first call's time is reported as
  warm-up), at --size, --steps (Euler), guidance 7.5, each batch of
  --batches: it/s of the UNet loop ((steps-1) over the time between the
  first and the last step's end, synchronised), seconds an image end to end
  (text encoding and VAE decode included, median of --reps) and peak device
  memory (torch.cuda.max_memory_allocated, from a reset before the run).

Progress goes to stderr; one JSON object is printed on the last line.

    python3 torch_sd.py --model DIR --shape sd15 [--make] [--ref FILE] [--modes eager,compile]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

PROMPT = "a photograph of an astronaut riding a horse"

SCHEDULER = {"_class_name": "EulerDiscreteScheduler", "num_train_timesteps": 1000, "beta_start": 0.00085,
             "beta_end": 0.012, "beta_schedule": "scaled_linear", "steps_offset": 1, "set_alpha_to_one": False,
             "clip_sample": False, "timestep_spacing": "leading", "prediction_type": "epsilon",
             "interpolation_type": "linear", "use_karras_sigmas": False}

VAE = dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=[128, 256, 512, 512], layers_per_block=2,
           down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4, norm_num_groups=32,
           act_fn="silu")
CLIP_L = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, hidden_act="quick_gelu",
              projection_dim=768)

SHAPES = {
    "sd15": dict(
        pipeline="StableDiffusionPipeline", size=512,
        unet=dict(sample_size=64, in_channels=4, out_channels=4, block_out_channels=[320, 640, 1280, 1280], layers_per_block=2,
                  down_block_types=["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
                  up_block_types=["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3, cross_attention_dim=768, attention_head_dim=8,
                  norm_num_groups=32),
        vae=dict(VAE, sample_size=512, scaling_factor=0.18215),
        texts=[("text_encoder", "CLIPTextModel", CLIP_L)]),
    "sdxl": dict(
        pipeline="StableDiffusionXLPipeline", size=1024,
        unet=dict(sample_size=128, in_channels=4, out_channels=4, block_out_channels=[320, 640, 1280], layers_per_block=2,
                  down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
                  up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"], transformer_layers_per_block=[1, 2, 10],
                  attention_head_dim=[5, 10, 20], cross_attention_dim=2048, use_linear_projection=True,
                  addition_embed_type="text_time", addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816,
                  norm_num_groups=32),
        vae=dict(VAE, sample_size=1024, scaling_factor=0.13025, force_upcast=True),
        texts=[("text_encoder", "CLIPTextModel", CLIP_L),
               ("text_encoder_2", "CLIPTextModelWithProjection",
                dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20, hidden_act="gelu",
                     projection_dim=1280))]),
}


def log(*a):
    print("torch_sd:", *a, file=sys.stderr, flush=True)


def write_json(path, v):
    with open(path, "w") as f:
        json.dump(v, f, indent=1)


def write_tokenizer(d):
    """CLIP's tokenizer files over the bytes: each byte a token, the same
    ending a word, then <|startoftext|> and <|endoftext|>; no merges."""
    os.makedirs(d, exist_ok=True)
    # CLIP's byte-to-character table: printable bytes stand for themselves,
    # the others take the characters from 256 on, in order.
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    bu, n = {}, 0
    for b in range(256):
        if b in keep:
            bu[b] = chr(b)
        else:
            bu[b], n = chr(256 + n), n + 1
    vocab = {bu[b]: b for b in range(256)}
    vocab.update({bu[b] + "</w>": 256 + b for b in range(256)})
    vocab["<|startoftext|>"], vocab["<|endoftext|>"] = 512, 513
    write_json(os.path.join(d, "vocab.json"), vocab)
    with open(os.path.join(d, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "tokenizer_class": "CLIPTokenizer", "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 77, "do_lower_case": True})


def make(dirname, shape):
    import diffusers
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection
    s = SHAPES[shape]
    start = time.perf_counter()
    torch.manual_seed(0)
    index = {"_class_name": s["pipeline"], "_diffusers_version": diffusers.__version__,
             "scheduler": ["diffusers", "EulerDiscreteScheduler"], "unet": ["diffusers", "UNet2DConditionModel"],
             "vae": ["diffusers", "AutoencoderKL"], "feature_extractor": [None, None]}
    if shape == "sdxl":
        index.update(image_encoder=[None, None], force_zeros_for_empty_prompt=True)
    else:
        index.update(safety_checker=[None, None], requires_safety_checker=False)
    with torch.device("cuda"):
        for sub, cls, cfg in s["texts"]:
            c = CLIPTextConfig(vocab_size=514, max_position_embeddings=77, bos_token_id=512, eos_token_id=513, pad_token_id=513, **cfg)
            m = (CLIPTextModelWithProjection if cls.endswith("Projection") else CLIPTextModel)(c)
            m.to(torch.float16).save_pretrained(os.path.join(dirname, sub))
            write_tokenizer(os.path.join(dirname, sub.replace("text_encoder", "tokenizer")))
            index[sub] = ["transformers", cls]
            index[sub.replace("text_encoder", "tokenizer")] = ["transformers", "CLIPTokenizer"]
            del m
        for sub, cls, cfg in (("unet", UNet2DConditionModel, s["unet"]), ("vae", AutoencoderKL, s["vae"])):
            m = cls(**cfg)
            m.to(torch.float16).save_pretrained(os.path.join(dirname, sub))
            log(f"{sub}: {sum(p.numel() for p in m.parameters()) / 1e6:.0f}M parameters")
            del m
    os.makedirs(os.path.join(dirname, "scheduler"), exist_ok=True)
    write_json(os.path.join(dirname, "scheduler", "scheduler_config.json"), SCHEDULER)
    write_json(os.path.join(dirname, "model_index.json"), index)
    torch.cuda.empty_cache()
    log(f"wrote {shape} into {dirname} in {time.perf_counter() - start:.1f} s")


def load(dirname, dtype):
    import diffusers
    p = getattr(diffusers, json.load(open(os.path.join(dirname, "model_index.json")))["_class_name"])
    pipe = p.from_pretrained(dirname, torch_dtype=dtype).to("cuda")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def reference(a, out):
    from safetensors.torch import save_file
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    start = time.perf_counter()
    pipe = load(a.model, torch.float32)
    xl = SHAPES[a.shape]["pipeline"].startswith("StableDiffusionXL")
    g = torch.Generator("cuda").manual_seed(7)
    ref = {}
    encoders = [(pipe.tokenizer, pipe.text_encoder)] + ([(pipe.tokenizer_2, pipe.text_encoder_2)] if xl else [])
    with torch.inference_mode():
        for k, (tok, enc) in enumerate(encoders):
            ids = tok(PROMPT, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids.to("cuda")
            o = enc(ids, output_hidden_states=True)
            ref[f"clip{k}.ids"] = ids.to(torch.float32)
            ref[f"clip{k}.last"] = o.last_hidden_state
            ref[f"clip{k}.penultimate"] = o.hidden_states[-2]
            if hasattr(o, "text_embeds"):
                ref[f"clip{k}.projected"] = o.text_embeds
        cfg = pipe.unet.config
        f = SHAPES[a.shape]["size"] // 8
        x = torch.randn(2, 4, f, f, generator=g, device="cuda")
        text = torch.randn(2, 77, cfg.cross_attention_dim, generator=g, device="cuda")
        kw = {}
        ref["unet.x"], ref["unet.text"], ref["unet.t"] = x, text, torch.tensor([500.0], device="cuda")
        if xl:
            emb = torch.randn(2, 1280, generator=g, device="cuda")
            ids = torch.tensor([[8.0 * f, 8.0 * f, 0, 0, 8.0 * f, 8.0 * f]] * 2, device="cuda")
            kw["added_cond_kwargs"] = {"text_embeds": emb, "time_ids": ids}
            ref["unet.text_embeds"], ref["unet.time_ids"] = emb, ids
        ref["unet.out"] = pipe.unet(x, 500, encoder_hidden_states=text, **kw).sample
        log(f"reference UNet prediction at {f}×{f} latents: {time.perf_counter() - start:.1f} s")
        z = torch.randn(1, 4, f, f, generator=g, device="cuda")
        ref["vae.z"], ref["vae.out"] = z, pipe.vae.decode(z / pipe.vae.config.scaling_factor).sample
        log(f"reference VAE decode: {time.perf_counter() - start:.1f} s")
        r = a.ref_size // 8
        lat = torch.randn(1, 4, r, r, generator=g, device="cuda")
        img = pipe(PROMPT, negative_prompt="" if not xl else None, num_inference_steps=a.ref_steps, guidance_scale=7.5, latents=lat,
                   height=a.ref_size, width=a.ref_size, output_type="np").images
        ref["pipe.latents"] = lat
        ref["pipe.image"] = torch.from_numpy((img * 255).round()).to(torch.float32)
        log(f"reference pipeline, {a.ref_steps} steps at {a.ref_size}²: {time.perf_counter() - start:.1f} s")
    save_file({k: v.contiguous().float().cpu() for k, v in ref.items()}, out)
    del pipe
    torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def measure(pipe, a, b, size):
    marks = []

    def cb(p, i, t, kw):
        torch.cuda.synchronize()
        marks.append(time.perf_counter())
        return kw

    def once():
        marks.clear()
        torch.cuda.synchronize()
        start = time.perf_counter()
        pipe(PROMPT, num_images_per_prompt=b, num_inference_steps=a.steps, guidance_scale=7.5, height=size, width=size,
             callback_on_step_end=cb)
        torch.cuda.synchronize()
        return time.perf_counter() - start, (a.steps - 1) / (marks[-1] - marks[0])

    runs = [once() for _ in range(a.reps)]
    return statistics.median(r[0] for r in runs) / b, statistics.median(r[1] for r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--make", action="store_true", help="write the folder first, unless it holds model_index.json")
    ap.add_argument("--ref", default="", help="write reference outputs to this safetensors file")
    ap.add_argument("--ref-size", type=int, default=512)
    ap.add_argument("--ref-steps", type=int, default=20)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--size", type=int, default=0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batches", default="1")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    import diffusers
    res = {"torch": torch.__version__, "diffusers": diffusers.__version__, "gpu": torch.cuda.get_device_name(0), "runs": {}}
    if a.make and not os.path.exists(os.path.join(a.model, "model_index.json")):
        make(a.model, a.shape)
    if a.ref:
        reference(a, a.ref)
    size = a.size or SHAPES[a.shape]["size"]
    modes = [m for m in a.modes.split(",") if m]
    if modes:
        pipe = load(a.model, torch.float16)
    for mode in modes:
        if mode == "compile":
            pipe.unet.to(memory_format=torch.channels_last)
            pipe.unet = torch.compile(pipe.unet, mode="reduce-overhead", fullgraph=True)
        for b in [int(x) for x in a.batches.split(",")]:
            start = time.perf_counter()
            pipe(PROMPT, num_images_per_prompt=b, num_inference_steps=a.steps, guidance_scale=7.5, height=size, width=size)
            warm = time.perf_counter() - start
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            s_img, it_s = measure(pipe, a, b, size)
            fig = {"s_per_image": s_img, "it_s": it_s, "peak_bytes": torch.cuda.max_memory_allocated(), "warmup_s": warm}
            res["runs"][f"{mode}/{b}"] = fig
            log(f"{mode}, batch {b}, {size}², {a.steps} steps: {it_s:.2f} it/s, {s_img:.3f} s an image, "
                f"peak {fig['peak_bytes'] / 2**30:.2f} GiB (first run {warm:.1f} s)")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
