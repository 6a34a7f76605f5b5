package sd

import (
	"encoding/json"
	"path/filepath"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/errs"
)

// Options are what OpenWith takes beyond a folder, a device and a dtype.
// The zero value opens the folder as it is (Open).
type Options struct {
	// LoRAs are merged into the text encoders' and the UNet's weights as
	// they load, in order (see LoRA).
	LoRAs []LoRA
}

// OpenWith is Open with options: it loads the pipeline of a diffusers
// folder onto dev in dtype, with o's LoRAs merged into its weights.
func OpenWith(dir string, dev candle.Device, dtype candle.DType, o Options) (*Pipeline, error) {
	const op = "Open"
	b, err := pkg.ReadFile(op, filepath.Join(dir, "model_index.json"))
	if err != nil {
		return nil, err
	}
	var index struct {
		Class     string `json:"_class_name"`
		ZeroEmpty *bool  `json:"force_zeros_for_empty_prompt"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: filepath.Join(dir, "model_index.json"), Detail: err.Error()}
	}
	p := &Pipeline{dev: dev, dtype: dtype, sampler: scheduler.Euler}
	switch index.Class {
	case "StableDiffusionPipeline", "StableDiffusionImg2ImgPipeline":
	case "StableDiffusionXLPipeline", "StableDiffusionXLImg2ImgPipeline":
		p.xl, p.zeroNegative = true, index.ZeroEmpty == nil || *index.ZeroEmpty
	default:
		return nil, &errs.Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Path: filepath.Join(dir, "model_index.json"), Field: "_class_name",
			Detail: index.Class + ": Open takes Stable Diffusion 1.x, 2.x and XL pipelines (StableDiffusionPipeline, StableDiffusionXLPipeline)"}
	}
	components := []string{"text_encoder", "unet"}
	if p.xl {
		components = append(components, "text_encoder_2")
	}
	if p.loras, err = openLoRAs(o.LoRAs); err == nil {
		err = p.loras.outside(components...)
	}
	defer func() { p.loras.close(); p.loras = nil }()
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if err := p.load(dir); err != nil {
		p.Close()
		return nil, pkg.Wrap(op, err)
	}
	return p, nil
}
