package scheduler

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/rocm-go/rocm/errs"
)

// The prediction types.
const (
	Epsilon     = "epsilon"
	VPrediction = "v_prediction"
)

// Config is what the schedules use of a diffusers scheduler_config.json:
// the model's training noise schedule and the timesteps' spacing, whatever
// scheduler class the file names (any sampler runs from any of them, as
// diffusers' from_config does). A zero field takes diffusers' default.
type Config struct {
	// ClassName is the file's scheduler (_class_name): Schedules of any
	// Kind can be made from it.
	ClassName         string  `json:"_class_name"`
	NumTrainTimesteps int     `json:"num_train_timesteps"` // default 1000
	BetaStart         float64 `json:"beta_start"`          // default 0.00085 (SD's; diffusers' class default differs)
	BetaEnd           float64 `json:"beta_end"`            // default 0.012
	// BetaSchedule is "scaled_linear" (SD's, the default) or "linear".
	BetaSchedule string `json:"beta_schedule"`
	// PredictionType is Epsilon (the default) or VPrediction (SD 2.1 768).
	PredictionType string `json:"prediction_type"`
	// TimestepSpacing is "leading" (the default), "trailing" or "linspace".
	TimestepSpacing string `json:"timestep_spacing"`
	StepsOffset     int    `json:"steps_offset"`
	// SetAlphaToOne makes DDIM's and LCM's last step go to ᾱ = 1.
	SetAlphaToOne bool `json:"set_alpha_to_one"`
	// KarrasSigmas spaces Euler's and DPM++ 2M's sigmas as Karras et al.
	KarrasSigmas bool `json:"use_karras_sigmas"`
	// OriginalInferenceSteps and TimestepScaling are LCM's (defaults 50
	// and 10).
	OriginalInferenceSteps int     `json:"original_inference_steps"`
	TimestepScaling        float64 `json:"timestep_scaling"`

	// What the schedules do not implement; a file that sets them is
	// refused.
	ClipSample        bool   `json:"clip_sample"`
	Thresholding      bool   `json:"thresholding"`
	RescaleBetasZero  bool   `json:"rescale_betas_zero_snr"`
	FinalSigmasType   string `json:"final_sigmas_type"`
	InterpolationType string `json:"interpolation_type"`
	TimestepType      string `json:"timestep_type"`
	AlgorithmType     string `json:"algorithm_type"`
	SolverOrder       int    `json:"solver_order"`
}

// SD is Stable Diffusion 1.x's, 2.x's and XL's training noise schedule,
// with the leading spacing their pipelines use.
func SD() Config {
	return Config{NumTrainTimesteps: 1000, BetaStart: 0.00085, BetaEnd: 0.012, BetaSchedule: "scaled_linear",
		PredictionType: Epsilon, TimestepSpacing: "leading", StepsOffset: 1}
}

// ParseConfig reads a scheduler_config.json's bytes.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, pkg.Errorf("ParseConfig", errs.ErrFormat, "not a diffusers scheduler config: %v", err)
	}
	c.defaults()
	return c, pkg.Wrap("ParseConfig", c.check())
}

// LoadConfig reads a scheduler_config.json (a diffusers folder's
// scheduler/scheduler_config.json).
func LoadConfig(path string) (Config, error) {
	b, err := pkg.ReadFile("LoadConfig", path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(b)
	return c, errs.AtPath(err, path)
}

func (c *Config) defaults() {
	d := SD()
	if c.NumTrainTimesteps == 0 {
		c.NumTrainTimesteps = d.NumTrainTimesteps
	}
	if c.BetaStart == 0 && c.BetaEnd == 0 {
		c.BetaStart, c.BetaEnd = d.BetaStart, d.BetaEnd
	}
	if c.BetaSchedule == "" {
		c.BetaSchedule = d.BetaSchedule
	}
	if c.PredictionType == "" {
		c.PredictionType = Epsilon
	}
	if c.TimestepSpacing == "" {
		c.TimestepSpacing = "leading"
	}
	if c.OriginalInferenceSteps == 0 {
		c.OriginalInferenceSteps = 50
	}
	if c.TimestepScaling == 0 {
		c.TimestepScaling = 10
	}
}

func (c *Config) check() error {
	const op = "Config"
	bad := func(kind error, field, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: op, Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.NumTrainTimesteps < 2:
		return bad(errs.ErrArgument, "num_train_timesteps", "%d: want 2 or more", c.NumTrainTimesteps)
	case !(c.BetaStart > 0 && c.BetaEnd > c.BetaStart && c.BetaEnd < 1):
		return bad(errs.ErrArgument, "beta_start", "beta_start %g, beta_end %g: want 0 < start < end < 1", c.BetaStart, c.BetaEnd)
	case c.BetaSchedule != "scaled_linear" && c.BetaSchedule != "linear":
		return bad(errs.ErrUnsupported, "beta_schedule", "%q: want scaled_linear or linear", c.BetaSchedule)
	case c.PredictionType != Epsilon && c.PredictionType != VPrediction:
		return bad(errs.ErrUnsupported, "prediction_type", "%q: want %s or %s", c.PredictionType, Epsilon, VPrediction)
	case c.TimestepSpacing != "leading" && c.TimestepSpacing != "trailing" && c.TimestepSpacing != "linspace":
		return bad(errs.ErrUnsupported, "timestep_spacing", "%q: want leading, trailing or linspace", c.TimestepSpacing)
	case c.StepsOffset < 0 || c.StepsOffset >= c.NumTrainTimesteps:
		return bad(errs.ErrArgument, "steps_offset", "%d: want 0 to %d", c.StepsOffset, c.NumTrainTimesteps-1)
	case c.ClipSample:
		return bad(errs.ErrUnsupported, "clip_sample", "true: clipping the denoised estimate is not implemented (SD's configs set it false)")
	case c.Thresholding:
		return bad(errs.ErrUnsupported, "thresholding", "true: dynamic thresholding is not implemented")
	case c.RescaleBetasZero:
		return bad(errs.ErrUnsupported, "rescale_betas_zero_snr", "true: zero-SNR rescaling is not implemented")
	case c.FinalSigmasType != "" && c.FinalSigmasType != "zero":
		return bad(errs.ErrUnsupported, "final_sigmas_type", "%q: only zero is implemented", c.FinalSigmasType)
	case c.InterpolationType != "" && c.InterpolationType != "linear":
		return bad(errs.ErrUnsupported, "interpolation_type", "%q: only linear is implemented", c.InterpolationType)
	case c.TimestepType != "" && c.TimestepType != "discrete":
		return bad(errs.ErrUnsupported, "timestep_type", "%q: only discrete is implemented", c.TimestepType)
	case c.AlgorithmType != "" && c.AlgorithmType != "dpmsolver++":
		return bad(errs.ErrUnsupported, "algorithm_type", "%q: DPM++ 2M is dpmsolver++", c.AlgorithmType)
	case c.SolverOrder != 0 && c.SolverOrder != 2:
		return bad(errs.ErrUnsupported, "solver_order", "%d: DPM++ 2M is order 2", c.SolverOrder)
	}
	return nil
}

// alphasCumprod is ᾱ of every training timestep: the cumulative product
// of 1 − β, the betas linear in β (linear) or in √β (scaled_linear).
func (c *Config) alphasCumprod() []float64 {
	n := c.NumTrainTimesteps
	ac := make([]float64, n)
	p := 1.0
	for i := range n {
		var b float64
		if c.BetaSchedule == "scaled_linear" {
			r := linspaceAt(math.Sqrt(c.BetaStart), math.Sqrt(c.BetaEnd), n, i)
			b = r * r
		} else {
			b = linspaceAt(c.BetaStart, c.BetaEnd, n, i)
		}
		p *= 1 - b
		ac[i] = p
	}
	return ac
}
