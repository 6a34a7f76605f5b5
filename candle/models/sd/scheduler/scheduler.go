// Package scheduler computes the sampling schedules of Stable Diffusion's
// denoising loop on the CPU: DDIM, Euler, Euler Ancestral, DPM++ 2M (with
// or without Karras sigmas) and LCM, for ε- and v-prediction models, from
// the training noise schedule of a diffusers scheduler_config.json. The
// results match diffusers' schedulers of the same names.
//
// A Schedule is a list of Steps, each a few numbers: the timestep the
// model is given, the scale of its input, and the coefficients of two
// linear combinations. For latents x and the model's output out at a step,
//
//	denoised = DX·x + DOut·out
//	next     = X·x + D·denoised + DPrev·prevDenoised + Noise·z
//
// where prevDenoised is the previous step's denoised (multistep solvers)
// and z fresh standard normal noise (ancestral samplers). Every scheduler
// is one of these, so the denoising loop on a device is the same few
// fused multiply-adds whatever the sampler, with no host work and no
// device sync between steps. Sample runs the loop in float64 on slices:
// the reference the device loop is tested against.
package scheduler

import (
	"math"
	"slices"

	"github.com/rocm-go/rocm/errs"
)

// pkg makes this package's errors.
const pkg errs.Package = "scheduler"

// Kind is a sampling algorithm.
type Kind string

// The samplers.
const (
	// DDIM is deterministic DDIM (η = 0): diffusers' DDIMScheduler.
	DDIM Kind = "ddim"
	// Euler is diffusers' EulerDiscreteScheduler (Karras et al.'s
	// Algorithm 2 without churn).
	Euler Kind = "euler"
	// EulerAncestral adds fresh noise each step: diffusers'
	// EulerAncestralDiscreteScheduler, also the SD-Turbo and SDXL-Turbo
	// sampler (trailing spacing, one step).
	EulerAncestral Kind = "euler_a"
	// DPMPP2M is DPM-Solver++ (2M), second order multistep: diffusers'
	// DPMSolverMultistepScheduler with its defaults. Config.KarrasSigmas
	// gives "DPM++ 2M Karras".
	DPMPP2M Kind = "dpmpp_2m"
	// LCM is the latent consistency models' sampler (LCM-distilled UNets
	// and LoRAs, 1 to 8 steps): diffusers' LCMScheduler.
	LCM Kind = "lcm"
)

// Kinds lists the samplers.
func Kinds() []Kind { return []Kind{DDIM, Euler, EulerAncestral, DPMPP2M, LCM} }

// KindOf is the sampler of a diffusers scheduler class name
// (EulerDiscreteScheduler, say), or of one of the Kinds' names.
func KindOf(name string) (Kind, error) {
	switch name {
	case "DDIMScheduler", string(DDIM):
		return DDIM, nil
	case "EulerDiscreteScheduler", string(Euler):
		return Euler, nil
	case "EulerAncestralDiscreteScheduler", string(EulerAncestral):
		return EulerAncestral, nil
	case "DPMSolverMultistepScheduler", string(DPMPP2M):
		return DPMPP2M, nil
	case "LCMScheduler", string(LCM):
		return LCM, nil
	}
	return "", pkg.Errorf("KindOf", errs.ErrUnsupported, "scheduler %q: want one of %v, or their diffusers classes (DDIMScheduler, EulerDiscreteScheduler, EulerAncestralDiscreteScheduler, DPMSolverMultistepScheduler, LCMScheduler)", name, Kinds())
}

// Step is one step of a schedule (see the package doc).
type Step struct {
	// Timestep is the model's timestep input.
	Timestep float64
	// InputScale scales the latents into the model's input.
	InputScale float64
	// DX and DOut make the denoised estimate of the latents and the
	// model's output.
	DX, DOut float64
	// X, D, DPrev and Noise make the next latents of the latents, the
	// denoised estimate, the previous step's, and fresh noise.
	X, D, DPrev, Noise float64
	// Sigma is the step's noise level (σ, the noise-to-signal ratio
	// √((1−ᾱ)/ᾱ) at Timestep).
	Sigma float64
}

// Schedule is the steps of one sampling run.
type Schedule struct {
	Kind  Kind
	Steps []Step
	// The first latents are InitImage·(an image's latents) +
	// InitNoiseSigma·z, z standard normal noise: InitImage is zero but in
	// a schedule from FromImage (img2img).
	InitImage, InitNoiseSigma float64
}

// FromImage is the schedule of an img2img run of strength in (0, 1] over
// s's steps, as diffusers' img2img pipelines make it: the last
// ⌊steps·strength⌋ steps, started from the image's latents noised to the
// first of them (InitImage, InitNoiseSigma). Strength 1 is txt2img's
// steps from pure noise at their first level.
func (s *Schedule) FromImage(strength float64) (*Schedule, error) {
	const op = "Schedule.FromImage"
	n := len(s.Steps)
	if !(strength > 0 && strength <= 1) {
		return nil, pkg.Errorf(op, errs.ErrArgument, "strength %g: want more than 0, at most 1", strength)
	}
	keep := min(int(float64(n)*strength), n)
	if keep < 1 {
		return nil, pkg.Errorf(op, errs.ErrArgument, "strength %g of %d steps runs no step: raise the strength or the steps", strength, n)
	}
	if s.Kind == LCM {
		return nil, pkg.Errorf(op, errs.ErrUnsupported, "img2img with LCM: its schedule depends on the strength (not implemented)")
	}
	out := &Schedule{Kind: s.Kind, Steps: slices.Clone(s.Steps[n-keep:])}
	// A multistep solver starts again at first order: what the second
	// order takes from the previous step's estimate goes to this one's.
	first := &out.Steps[0]
	first.D, first.DPrev = first.D+first.DPrev, 0
	out.InitImage, out.InitNoiseSigma = out.NoiseTo(0)
	return out, nil
}

// NoiseTo is how clean latents x₀ are noised to the level of step i's
// input, image·x₀ + noise·z for standard normal noise z, as diffusers'
// schedulers' add_noise at the step's timestep: x₀ + σ·z for Euler's
// samplers, √ᾱ·x₀ + √(1−ᾱ)·z for the others. Past the last step it is
// the clean latents (1, 0). Inpainting with a 4-channel UNet puts the
// kept region back at each step's level this way.
func (s *Schedule) NoiseTo(i int) (image, noise float64) {
	if i < 0 || i >= len(s.Steps) {
		return 1, 0
	}
	sg := s.Steps[i].Sigma
	switch s.Kind {
	case Euler, EulerAncestral:
		return 1, sg
	}
	// ᾱ = 1/(σ²+1)
	return 1 / math.Sqrt(sg*sg+1), sg / math.Sqrt(sg*sg+1)
}

// New makes the schedule of a sampler over steps steps for a model
// trained with cfg's noise schedule.
func New(kind Kind, cfg Config, steps int) (*Schedule, error) {
	const op = "New"
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	if steps < 1 || steps > cfg.NumTrainTimesteps {
		return nil, pkg.Errorf(op, errs.ErrArgument, "%d steps: want 1 to %d (num_train_timesteps)", steps, cfg.NumTrainTimesteps)
	}
	if k, err := KindOf(string(kind)); err == nil {
		kind = k // a diffusers class name
	}
	ac := cfg.alphasCumprod()
	var s *Schedule
	var err error
	switch kind {
	case DDIM:
		s, err = ddim(cfg, ac, steps)
	case Euler, EulerAncestral:
		s, err = euler(cfg, ac, steps, kind == EulerAncestral)
	case DPMPP2M:
		s, err = dpmpp2m(cfg, ac, steps)
	case LCM:
		s, err = lcm(cfg, ac, steps)
	default:
		_, err = KindOf(string(kind))
	}
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	s.Kind = kind
	return s, nil
}

// Sample runs the schedule's loop in float64 from the first latents x
// (already scaled by InitNoiseSigma): model gives the model's output for
// step i's input (InputScale·x) at its Timestep, and noise step i's fresh
// noise (called only where Noise is not zero; nil for a deterministic
// sampler). It returns the final latents, a new slice.
func (s *Schedule) Sample(x []float64, model func(i int, t float64, in []float64) []float64, noise func(i int) []float64) []float64 {
	x = slices.Clone(x)
	in := make([]float64, len(x))
	den := make([]float64, len(x))
	prev := make([]float64, len(x))
	for i, st := range s.Steps {
		for j, v := range x {
			in[j] = st.InputScale * v
		}
		out := model(i, st.Timestep, in)
		var z []float64
		if st.Noise != 0 {
			z = noise(i)
		}
		for j, v := range x {
			d := st.DX*v + st.DOut*out[j]
			n := st.X*v + st.D*d + st.DPrev*prev[j]
			if z != nil {
				n += st.Noise * z[j]
			}
			x[j], den[j] = n, d
		}
		prev, den = den, prev
	}
	return x
}

// sigmaOf is √((1−ᾱ)/ᾱ).
func sigmaOf(a float64) float64 { return math.Sqrt((1 - a) / a) }

// denoisedOf is the denoised estimate's coefficients (DX, DOut) in the
// σ parameterization (x = x₀ + σ·ε, Euler's): ε-prediction x − σ·out,
// v-prediction x/(σ²+1) − σ/√(σ²+1)·out.
func denoisedOf(pred string, sigma float64) (float64, float64) {
	if pred == VPrediction {
		return 1 / (sigma*sigma + 1), -sigma / math.Sqrt(sigma*sigma+1)
	}
	return 1, -sigma
}

// denoisedVP is the denoised estimate's coefficients in the variance
// preserving parameterization (x = √ᾱ·x₀ + √(1−ᾱ)·ε: DDIM's, LCM's,
// DPM-Solver's): ε-prediction (x − √(1−ᾱ)·out)/√ᾱ, v-prediction
// √ᾱ·x − √(1−ᾱ)·out.
func denoisedVP(pred string, a float64) (float64, float64) {
	if pred == VPrediction {
		return math.Sqrt(a), -math.Sqrt(1 - a)
	}
	return 1 / math.Sqrt(a), -math.Sqrt(1-a) / math.Sqrt(a)
}

// spaced is the inference timesteps of a spacing, largest first, as
// diffusers' DDIM, Euler and Euler Ancestral schedulers space them (numpy
// rounds half to even).
func spaced(cfg Config, steps int) []float64 {
	T := cfg.NumTrainTimesteps
	ts := make([]float64, steps)
	switch cfg.TimestepSpacing {
	case "linspace":
		for i := range steps {
			ts[steps-1-i] = linspaceAt(0, float64(T-1), steps, i)
		}
	case "leading":
		ratio := T / steps
		for i := range steps {
			ts[steps-1-i] = float64(i*ratio + cfg.StepsOffset)
		}
	case "trailing":
		ratio := float64(T) / float64(steps)
		for i := range steps {
			ts[i] = math.RoundToEven(float64(T)-float64(i)*ratio) - 1
		}
	}
	return ts
}

// linspaceAt is element i of numpy's linspace(a, b, n).
func linspaceAt(a, b float64, n, i int) float64 {
	if n == 1 {
		return a
	}
	if i == n-1 {
		return b
	}
	return a + float64(i)*(b-a)/float64(n-1)
}

// interp is numpy's interp(t, arange(len(f)), f).
func interp(t float64, f []float64) float64 {
	if t <= 0 {
		return f[0]
	}
	if t >= float64(len(f)-1) {
		return f[len(f)-1]
	}
	i := int(t)
	w := t - float64(i)
	return f[i] + w*(f[i+1]-f[i])
}

// sigmas is √((1−ᾱ)/ᾱ) of every training timestep.
func sigmas(ac []float64) []float64 {
	s := make([]float64, len(ac))
	for i, a := range ac {
		s[i] = sigmaOf(a)
	}
	return s
}

// karras is Karras et al.'s schedule (ρ = 7) of n sigmas from hi to lo.
func karras(hi, lo float64, n int) []float64 {
	const rho = 7.0
	maxInv, minInv := math.Pow(hi, 1/rho), math.Pow(lo, 1/rho)
	out := make([]float64, n)
	for i := range n {
		out[i] = math.Pow(maxInv+linspaceAt(0, 1, n, i)*(minInv-maxInv), rho)
	}
	return out
}

// timestepOf is the (fractional) training timestep of a sigma, by linear
// interpolation of log σ between the training timesteps': diffusers'
// _sigma_to_t.
func timestepOf(sigma float64, logSigmas []float64) float64 {
	ls := math.Log(max(sigma, 1e-10))
	// The last timestep whose log σ is at most ls, below the last.
	lo := 0
	for i, v := range logSigmas {
		if ls-v >= 0 {
			lo = i
		}
	}
	lo = min(lo, len(logSigmas)-2)
	low, high := logSigmas[lo], logSigmas[lo+1]
	w := min(max((low-ls)/(low-high), 0), 1)
	return (1-w)*float64(lo) + w*float64(lo+1)
}

// euler is the Euler and Euler Ancestral schedules.
func euler(cfg Config, ac []float64, steps int, ancestral bool) (*Schedule, error) {
	full := sigmas(ac)
	ts := spaced(cfg, steps)
	sig := make([]float64, steps+1)
	for i, t := range ts {
		sig[i] = interp(t, full)
	}
	if cfg.KarrasSigmas {
		if ancestral {
			return nil, pkg.Errorf("New", errs.ErrUnsupported, "use_karras_sigmas with Euler Ancestral: diffusers' EulerAncestralDiscreteScheduler has no Karras sigmas")
		}
		logs := make([]float64, len(full))
		for i, s := range full {
			logs[i] = math.Log(s)
		}
		copy(sig, karras(sig[0], sig[steps-1], steps))
		for i := range steps {
			ts[i] = timestepOf(sig[i], logs)
		}
	}
	s := &Schedule{Steps: make([]Step, steps)}
	maxSigma := slices.Max(sig)
	s.InitNoiseSigma = math.Sqrt(maxSigma*maxSigma + 1)
	if cfg.TimestepSpacing == "linspace" || cfg.TimestepSpacing == "trailing" {
		s.InitNoiseSigma = maxSigma
	}
	for i := range steps {
		sg, next := sig[i], sig[i+1]
		st := Step{Timestep: ts[i], InputScale: 1 / math.Sqrt(sg*sg+1), Sigma: sg}
		st.DX, st.DOut = denoisedOf(cfg.PredictionType, sg)
		to := next
		if ancestral {
			up := math.Sqrt(next * next * (sg*sg - next*next) / (sg * sg))
			to = math.Sqrt(next*next - up*up)
			st.Noise = up
		}
		// x + (x − denoised)/σ · (to − σ)
		st.X, st.D = to/sg, 1-to/sg
		s.Steps[i] = st
	}
	return s, nil
}

// ddim is deterministic DDIM.
func ddim(cfg Config, ac []float64, steps int) (*Schedule, error) {
	if cfg.TimestepSpacing == "linspace" {
		// DDIM's linspace timesteps are rounded to integers.
		ts := spaced(cfg, steps)
		for i := range ts {
			ts[i] = math.RoundToEven(ts[i])
		}
		return ddimAt(cfg, ac, steps, ts), nil
	}
	return ddimAt(cfg, ac, steps, spaced(cfg, steps)), nil
}

func ddimAt(cfg Config, ac []float64, steps int, ts []float64) *Schedule {
	final := ac[0]
	if cfg.SetAlphaToOne {
		final = 1
	}
	ratio := cfg.NumTrainTimesteps / steps
	s := &Schedule{Steps: make([]Step, steps), InitNoiseSigma: 1}
	for i, t := range ts {
		a := ac[int(t)]
		ap := final
		if p := int(t) - ratio; p >= 0 {
			ap = ac[p]
		}
		st := Step{Timestep: t, InputScale: 1, Sigma: sigmaOf(a)}
		st.DX, st.DOut = denoisedVP(cfg.PredictionType, a)
		// √ᾱₚ·x₀ + √(1−ᾱₚ)·ε, with ε = (x − √ᾱ·x₀)/√(1−ᾱ)
		st.X = math.Sqrt(1-ap) / math.Sqrt(1-a)
		st.D = math.Sqrt(ap) - math.Sqrt(1-ap)*math.Sqrt(a)/math.Sqrt(1-a)
		s.Steps[i] = st
	}
	return s
}

// dpmpp2m is DPM-Solver++ 2M (midpoint), its final step first order
// (diffusers' final_sigmas_type "zero").
func dpmpp2m(cfg Config, ac []float64, steps int) (*Schedule, error) {
	T := cfg.NumTrainTimesteps
	ts := make([]float64, steps)
	switch cfg.TimestepSpacing {
	case "linspace":
		for i := range steps {
			ts[i] = math.RoundToEven(linspaceAt(0, float64(T-1), steps+1, steps-i))
		}
	case "leading":
		ratio := T / (steps + 1)
		for i := range steps {
			ts[i] = float64((steps-i)*ratio + cfg.StepsOffset)
		}
	case "trailing":
		ratio := float64(T) / float64(steps)
		for i := range steps {
			ts[i] = math.Trunc(math.RoundToEven(float64(T)-float64(i)*ratio)) - 1
		}
	}
	full := sigmas(ac)
	sig := make([]float64, steps+1)
	if cfg.KarrasSigmas {
		logs := make([]float64, len(full))
		for i, s := range full {
			logs[i] = math.Log(s)
		}
		copy(sig, karras(full[len(full)-1], full[0], steps))
		for i := range steps {
			ts[i] = math.RoundToEven(timestepOf(sig[i], logs))
		}
	} else {
		for i, t := range ts {
			sig[i] = interp(t, full)
		}
	}
	// α_t = 1/√(σ²+1), σ_t = σ·α_t, λ = log α_t − log σ_t = −log σ.
	alpha := func(s float64) float64 { return 1 / math.Sqrt(s*s+1) }
	s := &Schedule{Steps: make([]Step, steps), InitNoiseSigma: 1}
	for i := range steps {
		sg, next := sig[i], sig[i+1]
		a := alpha(sg)
		st := Step{Timestep: ts[i], InputScale: 1, Sigma: sg}
		st.DX, st.DOut = denoisedVP(cfg.PredictionType, a*a)
		an := alpha(next)
		if next == 0 {
			// The last step: x₀ itself (σ_t/σ_s = 0, e^{−h} = 0, α_t = 1).
			st.X, st.D = 0, an
			s.Steps[i] = st
			continue
		}
		h := math.Log(sg) - math.Log(next) // λ_t − λ_s
		st.X = (next * an) / (sg * a)
		em := math.Expm1(-h) // e^{−h} − 1
		st.D = -an * em
		if i > 0 {
			// D₁ = (m₀ − m₁)/r₀, r₀ = h₀/h: x_t = … − α_t(e^{−h}−1)(D₀ + D₁/2).
			r0 := (math.Log(sig[i-1]) - math.Log(sg)) / h
			st.D = -an * em * (1 + 0.5/r0)
			st.DPrev = an * em * 0.5 / r0
		}
		s.Steps[i] = st
	}
	return s, nil
}

// lcm is the latent consistency models' sampler.
func lcm(cfg Config, ac []float64, steps int) (*Schedule, error) {
	orig := cfg.OriginalInferenceSteps
	T := cfg.NumTrainTimesteps
	if orig < 1 || orig > T {
		return nil, pkg.Errorf("New", errs.ErrArgument, "original_inference_steps %d: want 1 to %d", orig, T)
	}
	if steps > orig {
		return nil, pkg.Errorf("New", errs.ErrArgument, "%d steps: LCM takes at most original_inference_steps (%d)", steps, orig)
	}
	k := T / orig
	origin := make([]int, orig) // largest first
	for i := range orig {
		origin[i] = (orig-i)*k - 1
	}
	ts := make([]int, steps)
	for i := range steps {
		ts[i] = origin[int(math.Floor(float64(i)*float64(orig)/float64(steps)))]
	}
	final := ac[0]
	if cfg.SetAlphaToOne {
		final = 1
	}
	s := &Schedule{Steps: make([]Step, steps), InitNoiseSigma: 1}
	const sigmaData = 0.5
	for i, t := range ts {
		a := ac[t]
		sc := float64(t) * cfg.TimestepScaling
		cSkip := sigmaData * sigmaData / (sc*sc + sigmaData*sigmaData)
		cOut := sc / math.Sqrt(sc*sc+sigmaData*sigmaData)
		x0x, x0o := denoisedVP(cfg.PredictionType, a)
		st := Step{Timestep: float64(t), InputScale: 1, Sigma: sigmaOf(a), DX: cSkip + cOut*x0x, DOut: cOut * x0o}
		if i == steps-1 {
			st.D = 1
		} else {
			ap := final
			if p := ts[i+1]; p >= 0 {
				ap = ac[p]
			}
			st.D, st.Noise = math.Sqrt(ap), math.Sqrt(1-ap)
		}
		s.Steps[i] = st
	}
	return s, nil
}
