"""Writes two tiny random UNet2DConditionModels in a diffusers unet/
folder's form, sd/ (SD 1.x's layout: convolution projections) and xl/
(SDXL's: linear projections, two transformer layers in a block, the added
text and time conditioning), each with config.json,
diffusion_pytorch_model.safetensors and golden.json: what diffusers'
UNet2DConditionModel predicts in float64 for given latents, timestep and
conditioning.

    PYTHONPATH=diffusers/src python3 make.py
"""
import json
import os
import struct

import torch
from diffusers.models import UNet2DConditionModel

here = os.path.dirname(os.path.abspath(__file__))


def write(name, cfg, extra):
    torch.manual_seed(0)
    unet = UNet2DConditionModel(**cfg).double().eval()
    with torch.no_grad():
        for n, p in unet.named_parameters():
            if "norm" in n and n.endswith("weight"):
                p.normal_(1, 0.1)
            else:
                p.normal_(0, 0.15)
            p.copy_(p.float().double())  # the values the file holds
    d = os.path.join(here, name)
    os.makedirs(d, exist_ok=True)
    header, blobs, off = {}, [], 0
    for n, t in unet.state_dict().items():
        b = t.detach().float().contiguous().numpy().tobytes()
        header[n] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "diffusion_pytorch_model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(unet.config, _class_name="UNet2DConditionModel"), f, indent=2, default=list)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, cfg["in_channels"], 4, 6, generator=g, dtype=torch.float64)
    text = torch.randn(2, 5, cfg["cross_attention_dim"], generator=g, dtype=torch.float64)
    kw = {}
    out = {"x": x.tolist(), "text": text.tolist(), "t": 541.0}
    if extra:
        embeds = torch.randn(2, extra, generator=g, dtype=torch.float64)
        ids = torch.tensor([[32, 48, 0, 0, 32, 48], [24, 40, 4, 8, 32, 48]], dtype=torch.float64)
        kw["added_cond_kwargs"] = {"text_embeds": embeds, "time_ids": ids}
        out.update(text_embeds=embeds.tolist(), time_ids=ids.tolist())
    with torch.no_grad():
        y = unet(x, torch.tensor(541.0, dtype=torch.float64), encoder_hidden_states=text, **kw).sample
    out["out"] = y.tolist()
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))


base = dict(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=[8, 16],
            norm_num_groups=4, cross_attention_dim=12)
write("sd", dict(base, down_block_types=["CrossAttnDownBlock2D", "DownBlock2D"],
                 up_block_types=["UpBlock2D", "CrossAttnUpBlock2D"], attention_head_dim=1), 0)
write("xl", dict(base, down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"],
                 up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"], attention_head_dim=[1, 2],
                 transformer_layers_per_block=[1, 2], use_linear_projection=True,
                 addition_embed_type="text_time", addition_time_embed_dim=8,
                 projection_class_embeddings_input_dim=6 * 8 + 10), 10)
