"""Writes ldm-sd1.json, ldm-sd2.json and ldm-sdxl.json: how single-file
checkpoints in the original (LDM/SGM) names are made of the tensors of
tiny-sd/ and tiny-sdxl/, so that the tests build the files themselves
(the SDXL one would be over a megabyte) from the folders' weights.

Each manifest lists the file's tensors, each with its sources (a model
folder and a tensor name) and how it is made of them: "same", "cat" (q, k
and v stacked along dim 0), "conv" (a linear weight as a 1x1 convolution),
"T" (transposed) or "zeros" (of "shape").

    PYTHONPATH=diffusers/src python3 make_ldm.py diffusers

where diffusers is a checkout of huggingface/diffusers (its scripts/ and
src/), with torch and numpy; huggingface_hub and safetensors, which
diffusers imports but these conversions do not use, may be stand-ins. The text
encoders are converted by diffusers' own scripts
(convert_diffusers_to_original_stable_diffusion.py for SD 2.x's OpenCLIP
names, convert_diffusers_to_original_sdxl.py for SDXL's); those scripts'
UNet and VAE tables assume SD's four (XL's three) blocks of two layers, so
the UNet and VAE names are written here from the folders' configs. Every
checkpoint is then converted back by diffusers' single-file loader
(diffusers.loaders.single_file_utils) and must give the folders' tensors
exactly, which checks the names independently of the Go code. The SD 2.x
case is tiny-sd with its text encoder in OpenCLIP's names and an unused
text_projection.

It also writes ldm-shapes-sd15.txt, ldm-shapes-sd21.txt and
ldm-shapes-sdxl.txt: the names and shapes, without data, of the real
models' single files (see real_shapes).
"""
import hashlib
import json
import os
import struct
import sys
import types

import numpy as np
import torch

from diffusers.loaders import single_file_utils as sfu

here = os.path.dirname(os.path.abspath(__file__))
scripts = os.path.join(sys.argv[1], "scripts")


def script(name):
    mod = types.ModuleType(name)
    src = open(os.path.join(scripts, name + ".py")).read()
    exec(compile(src.split('if __name__ == "__main__":')[0], name, "exec"), mod.__dict__)
    return mod


sd_script = script("convert_diffusers_to_original_stable_diffusion")
xl_script = script("convert_diffusers_to_original_sdxl")


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", k
        a, b = v["data_offsets"]
        out[k] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").copy()).reshape(v["shape"])
    return out


def folder(name):
    d = os.path.join(here, name)
    comps = {}
    for c in ("text_encoder", "text_encoder_2", "unet", "vae"):
        for f in ("model.safetensors", "diffusion_pytorch_model.safetensors"):
            p = os.path.join(d, c, f)
            if os.path.exists(p):
                comps[c] = load(p)
    cfgs = {c: json.load(open(os.path.join(d, c, "config.json"))) for c in comps}
    return comps, cfgs


RESNET = [("norm1.", "in_layers.0."), ("conv1.", "in_layers.2."), ("norm2.", "out_layers.0."),
          ("conv2.", "out_layers.3."), ("time_emb_proj.", "emb_layers.1."), ("conv_shortcut.", "skip_connection.")]


def resnet(s):
    for hf, ldm in RESNET:
        if s.startswith(hf):
            return ldm + s[len(hf):]
    raise KeyError(s)


def unet_to_ldm(sd, cfg):
    """diffusers' UNet names to LDM's, for any number of blocks and layers."""
    L = cfg["layers_per_block"]
    fixed = {"time_embedding.linear_1.": "time_embed.0.", "time_embedding.linear_2.": "time_embed.2.",
             "conv_in.": "input_blocks.0.0.", "conv_norm_out.": "out.0.", "conv_out.": "out.2.",
             "add_embedding.linear_1.": "label_emb.0.0.", "add_embedding.linear_2.": "label_emb.0.2."}
    out = {}
    for k, v in sd.items():
        p = k.split(".")
        name = None
        for hf, ldm in fixed.items():
            if k.startswith(hf):
                name = ldm + k[len(hf):]
        if name is None and p[0] == "down_blocks":
            b = int(p[1])
            if p[2] == "resnets":
                name = f"input_blocks.{1 + b * (L + 1) + int(p[3])}.0." + resnet(".".join(p[4:]))
            elif p[2] == "attentions":
                name = f"input_blocks.{1 + b * (L + 1) + int(p[3])}.1." + ".".join(p[4:])
            elif p[2] == "downsamplers":
                name = f"input_blocks.{(b + 1) * (L + 1)}.0.op." + ".".join(p[5:])
        elif name is None and p[0] == "mid_block":
            if p[1] == "resnets":
                name = f"middle_block.{2 * int(p[2])}." + resnet(".".join(p[3:]))
            else:
                name = "middle_block.1." + ".".join(p[3:])
        elif name is None and p[0] == "up_blocks":
            b = int(p[1])
            if p[2] == "resnets":
                name = f"output_blocks.{b * (L + 1) + int(p[3])}.0." + resnet(".".join(p[4:]))
            elif p[2] == "attentions":
                name = f"output_blocks.{b * (L + 1) + int(p[3])}.1." + ".".join(p[4:])
            elif p[2] == "upsamplers":
                attn = cfg["up_block_types"][b].startswith("CrossAttn")
                name = f"output_blocks.{b * (L + 1) + L}.{2 if attn else 1}.conv." + ".".join(p[5:])
        assert name is not None, k
        out["model.diffusion_model." + name] = v
    return out


def vae_to_ldm(sd, cfg):
    """diffusers' AutoencoderKL names to LDM's, for any number of blocks."""
    n = len(cfg["block_out_channels"])
    out = {}
    for k, v in sd.items():
        p = k.split(".")
        name = None
        if p[0] in ("quant_conv", "post_quant_conv") or p[1] in ("conv_in", "conv_out"):
            name = k
        elif p[1] == "conv_norm_out":
            name = p[0] + ".norm_out." + p[2]
        elif p[1] in ("down_blocks", "up_blocks"):
            i = int(p[2]) if p[1] == "down_blocks" else n - 1 - int(p[2])
            blk = "down" if p[1] == "down_blocks" else "up"
            if p[3] == "resnets":
                name = f"{p[0]}.{blk}.{i}.block.{p[4]}." + ".".join(p[5:]).replace("conv_shortcut", "nin_shortcut")
            else:
                name = f"{p[0]}.{blk}.{i}.{blk}sample.conv." + p[-1]
        elif p[1] == "mid_block" and p[2] == "resnets":
            name = f"{p[0]}.mid.block_{int(p[3]) + 1}." + ".".join(p[4:]).replace("conv_shortcut", "nin_shortcut")
        elif p[1] == "mid_block":
            layer = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out": "proj_out"}[p[4]]
            name = f"{p[0]}.mid.attn_1.{layer}.{p[-1]}"
            if v.ndim == 2:
                v = sd_script.reshape_weight_for_sd(v)
        assert name is not None, k
        out["first_stage_model." + name] = v
    return out


def same(a, b):
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))[:10]
    for k in a:
        assert a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k


class TextModel:
    def __init__(self, hidden):
        self.config = types.SimpleNamespace(hidden_size=hidden)


def manifest(ldm, comps):
    """Names each LDM tensor's sources by value: the weights are random."""
    by = {}
    for c, sd in comps.items():
        for k, v in sd.items():
            by.setdefault(hashlib.sha1(v.contiguous().numpy().tobytes()).hexdigest(), []).append((c, k, v))

    def find(t):
        for c, k, v in by.get(hashlib.sha1(t.contiguous().numpy().tobytes()).hexdigest(), []):
            return [c, k], v
        return None, None

    out = []
    for name in sorted(ldm):
        t = ldm[name]
        src, v = find(t)
        if src is not None and v.shape == t.shape:
            out.append({"name": name, "op": "same", "from": [src]})
            continue
        if src is not None and t.ndim == 4:
            out.append({"name": name, "op": "conv", "from": [src]})
            continue
        src, v = find(t.T) if t.ndim == 2 else (None, None)
        if src is not None:
            out.append({"name": name, "op": "T", "from": [src]})
            continue
        if not t.any():
            out.append({"name": name, "op": "zeros", "shape": list(t.shape)})
            continue
        parts = [find(x)[0] for x in t.chunk(3, 0)]
        assert None not in parts, name
        out.append({"name": name, "op": "cat", "from": parts})
    return out


def write(name, layout, ldm, comps):
    m = manifest(ldm, comps)
    with open(os.path.join(here, name), "w") as f:
        f.write('{"layout": "%s", "tensors": [\n' % layout)
        f.write(",\n".join(json.dumps(t, separators=(",", ":")) for t in m))
        f.write("\n]}\n")


def sd1():
    comps, cfgs = folder("tiny-sd")
    te = {"cond_stage_model.transformer." + k: v for k, v in sd_script.convert_text_enc_state_dict(comps["text_encoder"]).items()}
    ldm = {**unet_to_ldm(comps["unet"], cfgs["unet"]), **vae_to_ldm(comps["vae"], cfgs["vae"]), **te}
    same(sfu.convert_ldm_unet_checkpoint(ldm, cfgs["unet"]), comps["unet"])
    same(sfu.convert_ldm_vae_checkpoint(ldm, cfgs["vae"]), comps["vae"])
    same(sfu.convert_ldm_clip_checkpoint(ldm), comps["text_encoder"])
    write("ldm-sd1.json", "sd1", ldm, comps)
    # SD 2.x: the text encoder in OpenCLIP's names, as the SD script writes
    # them for a 2.x model, and the text projection that SD 2.x does not use.
    te = {"transformer." + k: v for k, v in comps["text_encoder"].items() if not k.endswith("position_ids")}
    te = {"cond_stage_model.model." + k: v for k, v in sd_script.convert_text_enc_state_dict_v20(te).items()}
    hidden = cfgs["text_encoder"]["hidden_size"]
    te["cond_stage_model.model.text_projection"] = torch.zeros(hidden, hidden)
    ldm2 = {**{k: v for k, v in ldm.items() if not k.startswith("cond_stage_model.")}, **te}
    back = sfu.convert_open_clip_checkpoint(TextModel(hidden), ldm2)
    back.pop("text_projection.weight", None)  # SD 2.x's is ignored
    same(back, {k: v for k, v in comps["text_encoder"].items() if not k.endswith("position_ids")})
    write("ldm-sd2.json", "sd2", ldm2, comps)


def sdxl():
    comps, cfgs = folder("tiny-sdxl")
    te1 = {"conditioner.embedders.0.transformer." + k: v for k, v in xl_script.convert_openai_text_enc_state_dict(comps["text_encoder"]).items()}
    te2 = {"conditioner.embedders.1.model." + k: v for k, v in xl_script.convert_openclip_text_enc_state_dict(comps["text_encoder_2"]).items()}
    te2["conditioner.embedders.1.model.text_projection"] = te2.pop("conditioner.embedders.1.model.text_projection.weight").T.contiguous()
    ldm = {**unet_to_ldm(comps["unet"], cfgs["unet"]), **vae_to_ldm(comps["vae"], cfgs["vae"]), **te1, **te2}
    same(sfu.convert_ldm_unet_checkpoint(ldm, cfgs["unet"]), comps["unet"])
    same(sfu.convert_ldm_vae_checkpoint(ldm, cfgs["vae"]), comps["vae"])
    same(sfu.convert_ldm_clip_checkpoint(ldm), comps["text_encoder"])
    hidden = cfgs["text_encoder_2"]["hidden_size"]
    back = sfu.convert_open_clip_checkpoint(TextModel(hidden), ldm, prefix="conditioner.embedders.1.model.")
    same(back, {k: v for k, v in comps["text_encoder_2"].items() if not k.endswith("position_ids")})
    write("ldm-sdxl.json", "sdxl", ldm, comps)


def meta_models():
    """Builds diffusers' models on the meta device: shapes without data."""
    nn = torch.nn
    for cls in (nn.Linear, nn.Conv2d, nn.GroupNorm, nn.LayerNorm, nn.Embedding):
        def init(self, *a, __orig=cls.__init__, **k):
            k["device"] = "meta"
            __orig(self, *a, **k)
        cls.__init__ = init
    from diffusers.models import AutoencoderKL, UNet2DConditionModel
    return AutoencoderKL, UNet2DConditionModel


def clip_text(hidden, layers, inter, proj=0):
    """A CLIP text model's transformers names and shapes (on meta)."""
    e = lambda *s: torch.empty(*s, device="meta")
    sd = {"text_model.embeddings.token_embedding.weight": e(49408, hidden),
          "text_model.embeddings.position_embedding.weight": e(77, hidden),
          "text_model.final_layer_norm.weight": e(hidden), "text_model.final_layer_norm.bias": e(hidden)}
    for i in range(layers):
        p = f"text_model.encoder.layers.{i}."
        for n in ("q", "k", "v", "out"):
            sd[p + f"self_attn.{n}_proj.weight"], sd[p + f"self_attn.{n}_proj.bias"] = e(hidden, hidden), e(hidden)
        for n in ("layer_norm1", "layer_norm2"):
            sd[p + n + ".weight"], sd[p + n + ".bias"] = e(hidden), e(hidden)
        sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = e(inter, hidden), e(inter)
        sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = e(hidden, inter), e(hidden)
    if proj:
        sd["text_projection.weight"] = e(proj, hidden)
    return sd


def real_shapes():
    """ldm-shapes-*.txt: the names and shapes of SD 1.5's, SD 2.1's and
    SDXL base's single files (the real models' configs, no data), for the
    tests of the configs read from shapes. Each line is a name, front-coded
    (the length it shares with the line before, then the rest), and its
    shape."""
    AutoencoderKL, UNet2DConditionModel = meta_models()
    vae_cfg = dict(block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
                   up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2, latent_channels=4)
    sd_blocks = dict(block_out_channels=[320, 640, 1280, 1280], layers_per_block=2,
                     down_block_types=["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
                     up_block_types=["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3)
    cases = {
        "sd15": (dict(sd_blocks, cross_attention_dim=768, attention_head_dim=8),
                 {"cond_stage_model.transformer.": (sd_script.convert_text_enc_state_dict, clip_text(768, 12, 3072))}),
        "sd21": (dict(sd_blocks, cross_attention_dim=1024, attention_head_dim=[5, 10, 20, 20], use_linear_projection=True),
                 {"cond_stage_model.model.": (lambda d: sd_script.convert_text_enc_state_dict_v20({"transformer." + k: v for k, v in d.items()}),
                                              clip_text(1024, 24, 4096))}),
        "sdxl": (dict(block_out_channels=[320, 640, 1280], layers_per_block=2, cross_attention_dim=2048,
                      down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
                      up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
                      attention_head_dim=[5, 10, 20], transformer_layers_per_block=[1, 2, 10], use_linear_projection=True,
                      addition_embed_type="text_time", addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816),
                 {"conditioner.embedders.0.transformer.": (xl_script.convert_openai_text_enc_state_dict, clip_text(768, 12, 3072)),
                  "conditioner.embedders.1.model.": (xl_script.convert_openclip_text_enc_state_dict, clip_text(1280, 32, 5120, 1280))}),
    }
    for name, (ucfg, texts) in cases.items():
        unet = UNet2DConditionModel(**ucfg)
        vae = AutoencoderKL(**vae_cfg)
        usd, vsd = unet.state_dict(), vae.state_dict()
        ldm = {**unet_to_ldm(usd, unet.config), **vae_to_ldm(vsd, vae.config)}
        for prefix, (convert, sd) in texts.items():
            t = {prefix + k: v for k, v in convert(sd).items()}
            proj = prefix + "text_projection.weight"
            if proj in t:
                t[prefix + "text_projection"] = t.pop(proj).T
            ldm.update(t)
        back = sfu.convert_ldm_unet_checkpoint(ldm, unet.config)
        assert {k: v.shape for k, v in back.items()} == {k: v.shape for k, v in usd.items()}, name
        back = sfu.convert_ldm_vae_checkpoint(ldm, vae.config)
        assert {k: v.shape for k, v in back.items()} == {k: v.shape for k, v in vsd.items()}, name
        with open(os.path.join(here, f"ldm-shapes-{name}.txt"), "w") as f:
            f.write(f"# {name}: diffusers' UNet has {len(usd)} tensors and its VAE {len(vsd)}\n")
            prev = ""
            for k in sorted(ldm):  # front-coded: the length shared with the name before, the rest, the shape
                n = len(os.path.commonprefix([prev, k]))
                f.write(f"{n} {k[n:]} " + ",".join(str(d) for d in ldm[k].shape) + "\n")
                prev = k


sd1()
sdxl()
real_shapes()
