package scheduler

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

// golden is a case of testdata/golden.json, written by testdata/golden.py
// with diffusers' schedulers.
type golden struct {
	Kind           Kind            `json:"kind"`
	Steps          int             `json:"steps"`
	Config         json.RawMessage `json:"config"`
	Timesteps      []float64       `json:"timesteps"`
	Sigmas         []float64       `json:"sigmas"`
	InitNoiseSigma float64         `json:"init_noise_sigma"`
	X0             []float64       `json:"x0"`
	Final          []float64       `json:"final"`
}

// The model and noise of golden.py.
func fakeModel(_ int, t float64, in []float64) []float64 {
	out := make([]float64, len(in))
	for j, x := range in {
		out[j] = 0.3*math.Sin(x*(1+t/1000)) + 0.1*math.Cos(t/100)*x
	}
	return out
}

func fakeNoise(n int) func(i int) []float64 {
	return func(i int) []float64 {
		z := make([]float64, n)
		for j := range z {
			z[j] = math.Sin(float64(17*i + 3*j + 1))
		}
		return z
	}
}

// goldenImage is an img2img case: diffusers' pipeline loop from an
// image's latents and one noise.
type goldenImage struct {
	Kind      Kind            `json:"kind"`
	Steps     int             `json:"steps"`
	Strength  float64         `json:"strength"`
	Config    json.RawMessage `json:"config"`
	Timesteps []float64       `json:"timesteps"`
	Image     []float64       `json:"image"`
	Z         []float64       `json:"z"`
	Final     []float64       `json:"final"`
}

type goldenFile struct {
	Cases   []golden
	Img2img []goldenImage
}

func readGolden(t *testing.T) goldenFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	require.NoError(t, err)
	var g goldenFile
	require.NoError(t, json.Unmarshal(b, &g))
	require.NotEmpty(t, g.Cases)
	require.NotEmpty(t, g.Img2img)
	return g
}

func loadGolden(t *testing.T) []golden { return readGolden(t).Cases }

// assertClose compares latents to diffusers' at float32's tolerance.
func assertClose(t *testing.T, want, got []float64) {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for j := range got {
		assert.LessOrEqual(t, math.Abs(got[j]-want[j])/max(scale, 1e-3), 1e-4, "latent %d: %g against diffusers' %g", j, got[j], want[j])
	}
}

// relErr is |a−b| over max(|b|, floor).
func relErr(a, b, floor float64) float64 { return math.Abs(a-b) / max(math.Abs(b), floor) }

// TestAgainstDiffusers compares every sampler's timesteps, sigmas, initial
// noise scale and a whole sampling run with diffusers'. diffusers builds
// its noise tables in float32 and steps Euler's latents in float32: the
// tolerances are float32's.
func TestAgainstDiffusers(t *testing.T) {
	for _, g := range loadGolden(t) {
		cfg, err := ParseConfig(g.Config)
		require.NoError(t, err)
		name := fmt.Sprintf("%s/%d steps/%s %s karras=%v %s", g.Kind, g.Steps, cfg.TimestepSpacing, cfg.PredictionType, cfg.KarrasSigmas, cfg.BetaSchedule)
		t.Run(name, func(t *testing.T) {
			s, err := New(g.Kind, cfg, g.Steps)
			require.NoError(t, err)
			require.Len(t, s.Steps, len(g.Timesteps))
			for i, st := range s.Steps {
				assert.InDelta(t, g.Timesteps[i], st.Timestep, 2e-3, "timestep %d", i)
			}
			if len(g.Sigmas) > 0 && g.Kind != DDIM && g.Kind != LCM {
				for i, st := range s.Steps {
					assert.LessOrEqual(t, relErr(st.Sigma, g.Sigmas[i], 1e-3), 1e-4, "sigma %d: %g against %g", i, st.Sigma, g.Sigmas[i])
				}
				assert.Zero(t, g.Sigmas[len(g.Sigmas)-1], "diffusers ends at σ = 0")
			}
			assert.LessOrEqual(t, relErr(s.InitNoiseSigma, g.InitNoiseSigma, 1), 1e-4, "init noise sigma %g against %g", s.InitNoiseSigma, g.InitNoiseSigma)
			x := make([]float64, len(g.X0))
			for j, v := range g.X0 {
				x[j] = v * s.InitNoiseSigma
			}
			assertClose(t, g.Final, s.Sample(x, fakeModel, fakeNoise(len(x))))
		})
	}
}

// TestImg2ImgAgainstDiffusers runs img2img's truncated schedules from a
// noised image as diffusers' img2img pipelines do.
func TestImg2ImgAgainstDiffusers(t *testing.T) {
	for _, g := range readGolden(t).Img2img {
		cfg, err := ParseConfig(g.Config)
		require.NoError(t, err)
		t.Run(fmt.Sprintf("%s/%d steps/strength %g/%s %s karras=%v", g.Kind, g.Steps, g.Strength, cfg.TimestepSpacing, cfg.PredictionType, cfg.KarrasSigmas), func(t *testing.T) {
			full, err := New(g.Kind, cfg, g.Steps)
			require.NoError(t, err)
			s, err := full.FromImage(g.Strength)
			require.NoError(t, err)
			require.Len(t, s.Steps, len(g.Timesteps))
			for i, st := range s.Steps {
				assert.InDelta(t, g.Timesteps[i], st.Timestep, 2e-3, "timestep %d", i)
			}
			x := make([]float64, len(g.Image))
			for j := range x {
				x[j] = s.InitImage*g.Image[j] + s.InitNoiseSigma*g.Z[j]
			}
			assertClose(t, g.Final, s.Sample(x, fakeModel, fakeNoise(len(x))))
		})
	}
}

func TestFromImageErrors(t *testing.T) {
	s, err := New(Euler, SD(), 10)
	require.NoError(t, err)
	for _, c := range []struct {
		strength float64
		text     string
	}{{0, "strength 0: want more than 0"}, {1.5, "at most 1"}, {0.05, "runs no step"}} {
		_, err := s.FromImage(c.strength)
		require.ErrorIs(t, err, errs.ErrArgument)
		assert.ErrorContains(t, err, c.text)
	}
	l, err := New(LCM, SD(), 4)
	require.NoError(t, err)
	_, err = l.FromImage(0.5)
	assert.ErrorIs(t, err, errs.ErrUnsupported)
	// Strength 1 keeps every step and starts from noise at the first level.
	f, err := s.FromImage(1)
	require.NoError(t, err)
	assert.Equal(t, s.Steps, f.Steps)
	assert.InDelta(t, s.Steps[0].Sigma, f.InitNoiseSigma, 1e-12)
	assert.Equal(t, 1.0, f.InitImage)
}

func TestGoldenCoversEverySampler(t *testing.T) {
	seen := map[Kind]bool{}
	for _, g := range loadGolden(t) {
		seen[g.Kind] = true
	}
	for _, k := range Kinds() {
		assert.True(t, seen[k], "%s has no golden case", k)
	}
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{"EulerDiscreteScheduler": Euler, "euler_a": EulerAncestral, "DPMSolverMultistepScheduler": DPMPP2M, "LCMScheduler": LCM, "ddim": DDIM} {
		k, err := KindOf(name)
		require.NoError(t, err)
		assert.Equal(t, want, k)
	}
	_, err := KindOf("PNDMScheduler")
	assert.ErrorIs(t, err, errs.ErrUnsupported)
	assert.ErrorContains(t, err, "EulerDiscreteScheduler")
	// New takes the class names as KindOf does (it used to panic on them).
	for name, want := range map[string]Kind{"EulerDiscreteScheduler": Euler, "DDIMScheduler": DDIM} {
		s, err := New(Kind(name), Config{}, 4)
		require.NoError(t, err, name)
		assert.Equal(t, want, s.Kind)
	}
	_, err = New("PNDMScheduler", Config{}, 4)
	assert.ErrorIs(t, err, errs.ErrUnsupported)
}

func TestConfig(t *testing.T) {
	// SD 1.5's scheduler/scheduler_config.json.
	c, err := ParseConfig([]byte(`{"_class_name": "PNDMScheduler", "_diffusers_version": "0.6.0", "beta_end": 0.012,
		"beta_schedule": "scaled_linear", "beta_start": 0.00085, "num_train_timesteps": 1000, "set_alpha_to_one": false,
		"skip_prk_steps": true, "steps_offset": 1, "trained_betas": null, "clip_sample": false}`))
	require.NoError(t, err)
	want := SD()
	want.ClassName = "PNDMScheduler"
	want.OriginalInferenceSteps, want.TimestepScaling = 50, 10
	assert.Equal(t, want, c)

	dir := t.TempDir()
	path := filepath.Join(dir, "scheduler_config.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"prediction_type": "sample"}`), 0o644))
	_, err = LoadConfig(path)
	require.ErrorIs(t, err, errs.ErrUnsupported)
	var e *errs.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "prediction_type", e.Field)
	assert.Equal(t, path, e.Path)
	_, err = LoadConfig(filepath.Join(dir, "none.json"))
	assert.ErrorIs(t, err, errs.ErrNotFound)

	for _, c := range []struct {
		json  string
		kind  error
		field string
	}{
		{`{`, errs.ErrFormat, ""},
		{`{"beta_start": 0.02, "beta_end": 0.01}`, errs.ErrArgument, "beta_start"},
		{`{"beta_schedule": "squaredcos_cap_v2"}`, errs.ErrUnsupported, "beta_schedule"},
		{`{"timestep_spacing": "uniform"}`, errs.ErrUnsupported, "timestep_spacing"},
		{`{"clip_sample": true}`, errs.ErrUnsupported, "clip_sample"},
		{`{"thresholding": true}`, errs.ErrUnsupported, "thresholding"},
		{`{"rescale_betas_zero_snr": true}`, errs.ErrUnsupported, "rescale_betas_zero_snr"},
		{`{"final_sigmas_type": "sigma_min"}`, errs.ErrUnsupported, "final_sigmas_type"},
		{`{"algorithm_type": "sde-dpmsolver++"}`, errs.ErrUnsupported, "algorithm_type"},
		{`{"solver_order": 3}`, errs.ErrUnsupported, "solver_order"},
		{`{"steps_offset": -1}`, errs.ErrArgument, "steps_offset"},
		{`{"num_train_timesteps": 1}`, errs.ErrArgument, "num_train_timesteps"},
	} {
		_, err := ParseConfig([]byte(c.json))
		require.ErrorIs(t, err, c.kind, c.json)
		if c.field != "" {
			require.ErrorAs(t, err, &e)
			assert.Equal(t, c.field, e.Field, c.json)
		}
	}
}

func TestNewErrors(t *testing.T) {
	cfg := SD()
	for _, c := range []struct {
		kind  Kind
		steps int
		err   error
		text  string
	}{
		{Euler, 0, errs.ErrArgument, "0 steps: want 1 to 1000"},
		{Euler, 1001, errs.ErrArgument, "1001 steps"},
		{LCM, 51, errs.ErrArgument, "at most original_inference_steps (50)"},
		{"heun", 20, errs.ErrUnsupported, `scheduler "heun"`},
	} {
		_, err := New(c.kind, cfg, c.steps)
		require.ErrorIs(t, err, c.err, "%s %d", c.kind, c.steps)
		assert.ErrorContains(t, err, c.text)
	}
	k := cfg
	k.KarrasSigmas = true
	_, err := New(EulerAncestral, k, 20)
	assert.ErrorIs(t, err, errs.ErrUnsupported)
	bad := cfg
	bad.PredictionType = "sample"
	_, err = New(Euler, bad, 20)
	assert.ErrorIs(t, err, errs.ErrUnsupported)
}

// TestDenoisedOfAPureSignal checks the coefficients' meaning: latents made
// of a clean x₀ and noise ε at a step's noise level, with the model
// predicting exactly that ε (or v), denoise to x₀.
func TestDenoisedOfAPureSignal(t *testing.T) {
	x0, eps := 0.7, -1.3
	for _, kind := range Kinds() {
		for _, pred := range []string{Epsilon, VPrediction} {
			cfg := SD()
			cfg.PredictionType = pred
			s, err := New(kind, cfg, 10)
			require.NoError(t, err)
			for i, st := range s.Steps {
				sg := st.Sigma
				a := 1 / (sg*sg + 1) // ᾱ
				// The VP latents √ᾱ·x₀ + √(1−ᾱ)·ε; Euler's are x₀ + σ·ε.
				x := math.Sqrt(a)*x0 + math.Sqrt(1-a)*eps
				if kind == Euler || kind == EulerAncestral {
					x = x0 + sg*eps
				}
				out := eps
				if pred == VPrediction {
					out = math.Sqrt(a)*eps - math.Sqrt(1-a)*x0
				}
				den := st.DX*x + st.DOut*out
				if kind == LCM {
					// LCM's boundary condition mixes in the latents: c_skip·x + c_out·x₀.
					sc := st.Timestep * 10 // timestep_scaling's default
					cSkip, cOut := 0.25/(sc*sc+0.25), sc/math.Sqrt(sc*sc+0.25)
					assert.InDelta(t, cSkip*x+cOut*x0, den, 1e-9, "%s %s step %d", kind, pred, i)
					continue
				}
				assert.InDelta(t, x0, den, 1e-9, "%s %s step %d", kind, pred, i)
			}
		}
	}
}

// TestNoiseTo checks the noising of clean latents to a step's level
// against the training schedule: ᾱ at the step's timestep for DDIM, DPM++
// and LCM, σ for Euler's samplers.
func TestNoiseTo(t *testing.T) {
	cfg := SD()
	ac := cfg.alphasCumprod()
	for _, k := range Kinds() {
		s, err := New(k, cfg, 5)
		require.NoError(t, err)
		for i, st := range s.Steps {
			img, noise := s.NoiseTo(i)
			switch k {
			case Euler, EulerAncestral:
				assert.Equal(t, 1.0, img, "%s step %d", k, i)
				assert.Equal(t, st.Sigma, noise, "%s step %d", k, i)
			default:
				a := ac[int(math.Round(st.Timestep))]
				assert.InDelta(t, math.Sqrt(a), img, 1e-6, "%s step %d", k, i)
				assert.InDelta(t, math.Sqrt(1-a), noise, 1e-6, "%s step %d", k, i)
			}
		}
		img, noise := s.NoiseTo(len(s.Steps))
		assert.Equal(t, [2]float64{1, 0}, [2]float64{img, noise}, "past the last step: the clean latents")
	}
}
