package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // init images may be JPEGs
	_ "image/png"
	"strings"

	"github.com/rocm-go/rocm/internal/worker"
)

// decodeImage decodes a PNG or JPEG, refusing one larger than maxSide
// pixels a side before its pixels are decoded (a small file can claim a
// huge size).
func decodeImage(b []byte, param string, maxSide int) (image.Image, *worker.Error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, worker.BadRequest(param, "%s is not a PNG or JPEG image: %v", param, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxSide || cfg.Height > maxSide {
		return nil, worker.BadRequest(param, "%s is %dx%d: want at most %d pixels a side (the worker's -max-size)", param, cfg.Width, cfg.Height, maxSide)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, worker.BadRequest(param, "%s: the %s image is corrupt: %v", param, format, err)
	}
	return img, nil
}

// decodeBase64 decodes base64, with or without a data URL
// prefix ("data:image/png;base64,"), as A1111's clients send.
func decodeBase64(s, param string) ([]byte, *worker.Error) {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		_, data, found := strings.Cut(rest, ",")
		if !found {
			return nil, worker.BadRequest(param, "%s: a data URL without a comma", param)
		}
		s = data
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, worker.BadRequest(param, "%s is not base64: %v", param, err)
	}
	return b, nil
}

// fitImage scales img to w×h (bilinear), as A1111 resizes an init image
// to the request's size; an image of that size is returned as is.
func fitImage(img image.Image, w, h int) image.Image {
	b := img.Bounds()
	if b.Dx() == w && b.Dy() == h {
		return img
	}
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	sx, sy := float64(b.Dx())/float64(w), float64(b.Dy())/float64(h)
	at := func(x, y int) [4]float64 {
		x, y = min(max(x, 0), b.Dx()-1), min(max(y, 0), b.Dy()-1)
		r, g, bl, a := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
		return [4]float64{float64(r), float64(g), float64(bl), float64(a)}
	}
	for y := range h {
		fy := (float64(y)+0.5)*sy - 0.5
		y0 := int(fy)
		if fy < 0 {
			y0 = -1
		}
		ty := fy - float64(y0)
		for x := range w {
			fx := (float64(x)+0.5)*sx - 0.5
			x0 := int(fx)
			if fx < 0 {
				x0 = -1
			}
			tx := fx - float64(x0)
			p00, p10, p01, p11 := at(x0, y0), at(x0+1, y0), at(x0, y0+1), at(x0+1, y0+1)
			var c [4]uint8
			for k := range 4 {
				v := (p00[k]*(1-tx)+p10[k]*tx)*(1-ty) + (p01[k]*(1-tx)+p11[k]*tx)*ty
				c[k] = uint8(min(max(v/257+0.5, 0), 255))
			}
			out.SetRGBA(x, y, color.RGBA{c[0], c[1], c[2], c[3]})
		}
	}
	return out
}

// maskImage makes the pipeline's mask (white repaints) of a client's:
// OpenAI's marks the region to edit with transparent pixels (alpha);
// A1111's is white where it repaints, black where it keeps (invert: the
// other way round).
func maskImage(m image.Image, alpha, invert bool) image.Image {
	b := m.Bounds()
	out := image.NewGray(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := range b.Dy() {
		for x := range b.Dx() {
			r, g, bl, a := m.At(b.Min.X+x, b.Min.Y+y).RGBA()
			var repaint bool
			if alpha {
				repaint = a < 0x8000
			} else {
				repaint = (299*r+587*g+114*bl)/1000 >= 0x8000
			}
			if repaint != invert {
				out.SetGray(x, y, color.Gray{255})
			}
		}
	}
	return out
}

// parseSize reads OpenAI's "WIDTHxHEIGHT" ("auto" or "": the model's).
func parseSize(s string) (w, h int, err error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "auto" {
		return 0, 0, nil
	}
	if _, err := fmt.Sscanf(s, "%dx%d", &w, &h); err != nil || fmt.Sprintf("%dx%d", w, h) != s {
		return 0, 0, fmt.Errorf("size %q: want WIDTHxHEIGHT, such as 512x512", s)
	}
	return w, h, nil
}

// overlay puts the kept pixels of init back over an inpainted image, as
// AUTOMATIC1111 does: the pipeline keeps them in latent space only, and
// the VAE's round trip changes them a little. mask is the pipeline's
// (white repaints).
func overlay(img *image.RGBA, init, mask image.Image) {
	b := img.Bounds()
	ib, mb := init.Bounds(), mask.Bounds()
	for y := range b.Dy() {
		for x := range b.Dx() {
			if g, _, _, _ := mask.At(mb.Min.X+x, mb.Min.Y+y).RGBA(); g >= 0x8000 {
				continue
			}
			img.Set(b.Min.X+x, b.Min.Y+y, init.At(ib.Min.X+x, ib.Min.Y+y))
		}
	}
}
