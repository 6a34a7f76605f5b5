package sd

import (
	"context"
	"fmt"
	"image"
	"strings"

	"github.com/rocm-go/rocm/errs"
)

// GenerateBatch runs text-to-image requests that share Width, Height,
// Steps, Sampler, Preview and TileVAE (and are all guided, Guidance > 1,
// or all unguided) as one UNet batch: each keeps its own prompts, seed
// (its noise is what Generate would draw for it alone), guidance and
// Batch, and gets the images Generate would give it. Requests with Init,
// Mask or Noise, or that differ in the shared fields, are refused
// (errs.ErrArgument naming the field and the requests' indices). A
// canceled ctx stops the whole batch between steps.
//
// Each request's Progress hears each step, with the previews of its own
// images. On the CPU the images are Generate's bit for bit; a GPU's
// kernels may sum a larger batch in another order, so that a value may
// round to the next 8-bit level.
func (p *Pipeline) GenerateBatch(ctx context.Context, rs []Request) ([][]*image.RGBA, error) {
	const op = "GenerateBatch"
	g, err := p.batch(rs)
	if err != nil {
		return nil, err
	}
	x, err := p.generate(ctx, g)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	defer x.Close()
	imgs, err := Images(x)
	if err != nil {
		return nil, pkg.Wrap(op, err)
	}
	out := make([][]*image.RGBA, len(g))
	for i, r := range g {
		out[i], imgs = imgs[:r.Batch:r.Batch], imgs[r.Batch:]
	}
	return out, nil
}

// BatchKey groups requests for GenerateBatch: requests of one key run as
// one batch. The key is the fields a batch shares, with Generate's
// defaults applied (Steps 30, Guidance 7.5, the pipeline's sampler), so
// that a request that leaves Steps zero batches with one that asks for
// 30. ok is false for a request that runs alone: one with Init, Mask or
// Noise.
func (p *Pipeline) BatchKey(r Request) (key string, ok bool) {
	r = p.withDefaults(r)
	if alone(r) != "" {
		return "", false
	}
	var b strings.Builder
	for i, f := range shared(r) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", f.name, f.value)
	}
	return b.String(), true
}

// field is a request's field by name.
type field struct {
	name  string
	value any
}

// shared is what the requests of a batch share (their defaults applied):
// one schedule, one latent size, one UNet batch that is guided or not,
// and one kind of preview and VAE decode for all.
func shared(r Request) []field {
	guidance := "unguided"
	if guided(r) {
		guidance = "guided"
	}
	return []field{{"Width", r.Width}, {"Height", r.Height}, {"Steps", r.Steps}, {"Sampler", r.Sampler},
		{"Guidance", guidance}, {"Preview", r.Preview}, {"TileVAE", r.TileVAE}}
}

// alone names the field that makes a request run alone (an init image
// and mask, which the loop takes for the whole batch, or noise of its
// own), or is empty.
func alone(r Request) string {
	switch {
	case r.Init != nil:
		return "Init"
	case r.Mask != nil:
		return "Mask"
	case r.Noise != nil:
		return "Noise"
	}
	return ""
}

// batch is rs with their defaults as one group, or the error that names
// the field and the requests that keep them apart.
func (p *Pipeline) batch(rs []Request) (group, error) {
	bad := func(field, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: "GenerateBatch", Kind: errs.ErrArgument, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	if len(rs) == 0 {
		return nil, bad("", "no requests: a batch takes at least one")
	}
	g := make(group, len(rs))
	for i, r := range rs {
		g[i] = p.withDefaults(r)
		if f := alone(g[i]); f != "" {
			return nil, bad(f, "request %d sets it: image-to-image, inpainting and given noise run alone (Generate)", i)
		}
	}
	want := shared(g[0])
	for i, r := range g[1:] {
		for k, f := range shared(r) {
			if f.value != want[k].value {
				return nil, bad(f.name, "requests 0 and %d differ (%v and %v): the requests of a batch share it", i+1, want[k].value, f.value)
			}
		}
	}
	return g, nil
}
