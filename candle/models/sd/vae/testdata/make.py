"""Writes a tiny random AutoencoderKL in a diffusers vae/ folder's form
(config.json, diffusion_pytorch_model.safetensors) and golden.json: what
diffusers' AutoencoderKL computes of it in float64, the decode of given
latents (scaled as the UNet sees them) and the encode of given images (the
mode of the latent distribution, scaled).

    PYTHONPATH=diffusers/src python3 make.py
"""
import json
import os
import struct

import torch
from diffusers.models import AutoencoderKL

torch.manual_seed(0)
cfg = dict(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 2,
           up_block_types=["UpDecoderBlock2D"] * 2, block_out_channels=[8, 16], layers_per_block=1,
           latent_channels=4, norm_num_groups=4, sample_size=16, scaling_factor=0.18215)
vae = AutoencoderKL(**cfg).double().eval()
with torch.no_grad():
    for name, p in vae.named_parameters():
        if "norm" in name and name.endswith("weight"):
            p.normal_(1, 0.1)
        else:
            p.normal_(0, 0.2)
        p.copy_(p.float().double())  # the values the file holds

here = os.path.dirname(os.path.abspath(__file__))
header, blobs, off = {}, [], 0
for name, t in vae.state_dict().items():
    b = t.detach().float().contiguous().numpy().tobytes()
    header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(here, "diffusion_pytorch_model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with open(os.path.join(here, "config.json"), "w") as f:
    json.dump(dict(vae.config, _class_name="AutoencoderKL"), f, indent=2, default=list)

g = torch.Generator().manual_seed(1)
latents = torch.randn(2, 4, 3, 5, generator=g, dtype=torch.float64)
images = torch.rand(1, 3, 8, 12, generator=g, dtype=torch.float64) * 2 - 1
with torch.no_grad():
    decoded = vae.decode(latents / cfg["scaling_factor"]).sample
    encoded = vae.encode(images).latent_dist.mode() * cfg["scaling_factor"]
with open(os.path.join(here, "golden.json"), "w") as f:
    json.dump({"latents": latents.tolist(), "decoded": decoded.tolist(),
               "images": images.tolist(), "encoded": encoded.tolist()}, f, separators=(",", ":"))
