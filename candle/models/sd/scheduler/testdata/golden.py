"""Writes golden.json: diffusers' schedules and sampling trajectories, which
the package's tests compare with its own. Needs PyTorch and diffusers'
source (src/diffusers on PYTHONPATH):

    PYTHONPATH=diffusers/src python3 golden.py > golden.json

The model is a fixed nonlinear function of its input and timestep, and the
fresh noise of ancestral steps a fixed sequence, so that both sides run the
same loop. diffusers computes its noise tables in float32.
"""
import json
import math
import sys

import torch
import diffusers.schedulers.scheduling_euler_ancestral_discrete as ea_mod
import diffusers.schedulers.scheduling_lcm as lcm_mod
from diffusers import (DDIMScheduler, DPMSolverMultistepScheduler, EulerAncestralDiscreteScheduler,
                       EulerDiscreteScheduler, LCMScheduler)

CLASSES = {"ddim": DDIMScheduler, "euler": EulerDiscreteScheduler, "euler_a": EulerAncestralDiscreteScheduler,
           "dpmpp_2m": DPMSolverMultistepScheduler, "lcm": LCMScheduler}
SD = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
          steps_offset=1, set_alpha_to_one=False, clip_sample=False, timestep_spacing="leading",
          prediction_type="epsilon")
N = 6


def model(x, t):
    t = float(t)
    return 0.3 * torch.sin(x * (1 + t / 1000)) + 0.1 * math.cos(t / 100) * x


def noise(i):
    return torch.tensor([math.sin(17 * i + 3 * j + 1) for j in range(N)], dtype=torch.float64)


class Noise:
    """Stands in for randn_tensor: the fixed sequence, one call a step."""

    def __init__(self):
        self.i = 0

    def __call__(self, *args, **kwargs):
        z = noise(self.i)
        self.i += 1
        return z


def run(kind, steps, **over):
    cfg = dict(SD, **over)
    s = CLASSES[kind].from_config(cfg)
    s.set_timesteps(steps)
    ea_mod.randn_tensor = lcm_mod.randn_tensor = Noise()
    x0 = torch.tensor([math.cos(5 * j + 2) for j in range(N)], dtype=torch.float64)
    x = x0 * float(s.init_noise_sigma)
    for t in s.timesteps:
        inp = s.scale_model_input(x, t)
        out = model(inp, t)
        x = s.step(out, t, x).prev_sample.to(torch.float64)
    return {"kind": kind, "steps": steps, "config": cfg,
            "timesteps": [float(t) for t in s.timesteps],
            "sigmas": [float(v) for v in getattr(s, "sigmas", [])],
            "init_noise_sigma": float(s.init_noise_sigma),
            "x0": x0.tolist(), "final": x.tolist()}


def img2img(kind, steps, strength, **over):
    """The loop of diffusers' img2img pipelines (get_timesteps, add_noise)."""
    cfg = dict(SD, **over)
    s = CLASSES[kind].from_config(cfg)
    s.set_timesteps(steps)
    ea_mod.randn_tensor = lcm_mod.randn_tensor = Noise()
    init = min(int(steps * strength), steps)
    start = max(steps - init, 0)
    ts = s.timesteps[start * s.order:]
    if hasattr(s, "set_begin_index"):
        s.set_begin_index(start * s.order)
    image = torch.tensor([math.cos(5 * j + 2) for j in range(N)], dtype=torch.float64)
    z = torch.tensor([math.sin(11 * j + 4) for j in range(N)], dtype=torch.float64)
    x = s.add_noise(image, z, ts[:1]).to(torch.float64)
    for t in ts:
        inp = s.scale_model_input(x, t)
        out = model(inp, t)
        x = s.step(out, t, x).prev_sample.to(torch.float64)
    return {"kind": kind, "steps": steps, "strength": strength, "config": cfg,
            "timesteps": [float(t) for t in ts], "image": image.tolist(), "z": z.tolist(), "final": x.tolist()}


images = []
for kind in ["ddim", "euler", "euler_a", "dpmpp_2m"]:
    for steps, strength in [(20, 0.6), (20, 1.0), (10, 0.35), (4, 0.5)]:
        images.append(img2img(kind, steps, strength))
    images.append(img2img(kind, 8, 0.5, timestep_spacing="trailing"))
images.append(img2img("dpmpp_2m", 25, 0.75, use_karras_sigmas=True))
images.append(img2img("euler", 30, 0.8, prediction_type="v_prediction"))

cases = []
for kind in ["ddim", "euler", "euler_a", "dpmpp_2m"]:
    for steps in [1, 3, 20, 25]:
        cases.append(run(kind, steps))
    for spacing in ["trailing", "linspace"]:
        for steps in [1, 4, 7]:
            cases.append(run(kind, steps, timestep_spacing=spacing))
    if kind != "euler_a":
        cases.append(run(kind, 20, prediction_type="v_prediction"))
        cases.append(run(kind, 8, prediction_type="v_prediction", timestep_spacing="trailing"))
for kind in ["euler", "dpmpp_2m"]:
    for steps in [3, 20, 30]:
        cases.append(run(kind, steps, use_karras_sigmas=True))
    cases.append(run(kind, 20, use_karras_sigmas=True, prediction_type="v_prediction"))
cases.append(run("euler", 50, beta_schedule="linear", beta_start=0.0001, beta_end=0.02))
for steps in [1, 2, 4, 8]:
    cases.append(run("lcm", steps))
cases.append(run("lcm", 4, prediction_type="v_prediction", set_alpha_to_one=True))
json.dump({"cases": cases, "img2img": images}, sys.stdout, indent=None, separators=(",", ":"))
