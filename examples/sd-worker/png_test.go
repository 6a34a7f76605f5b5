package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInfotext(t *testing.T) {
	p := params{Prompt: "a cat, oil painting", NegativePrompt: "blurry", Steps: 20, Sampler: "Euler a", CFGScale: 7,
		Seed: 42, Width: 512, Height: 768, Model: "sd-v1-5"}
	assert.Equal(t, "a cat, oil painting\nNegative prompt: blurry\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 42, Size: 512x768, Model: sd-v1-5", p.infotext())
	p.NegativePrompt, p.CFGScale, p.Strength, p.Model = "", 7.5, 0.75, "my, model"
	assert.Equal(t, "a cat, oil painting\nSteps: 20, Sampler: Euler a, CFG scale: 7.5, Seed: 42, Size: 512x768, Model: \"my, model\", Denoising strength: 0.75", p.infotext())
}

func TestEncodePNG(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{200, 10, 30, 255})
	for _, text := range []string{"a cat\nSteps: 4, Sampler: Euler, Seed: 1", "ein Café", "猫, Steps: 4"} {
		b, err := encodePNG(img, text)
		require.NoError(t, err)
		got, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err, "a valid PNG")
		assert.Equal(t, color.RGBA{200, 10, 30, 255}, color.RGBAModel.Convert(got.At(1, 1)))
		chunks, err := pngText(b)
		require.NoError(t, err)
		assert.Equal(t, text, chunks["parameters"])
	}
}

// pngText reads the text chunks of a PNG: keyword to text.
func pngText(b []byte) (map[string]string, error) {
	if len(b) < 8 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) {
		return nil, fmt.Errorf("not a PNG")
	}
	out := map[string]string{}
	for p := 8; p+12 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[p:]))
		if p+12+n > len(b) {
			return nil, fmt.Errorf("a chunk runs past the end")
		}
		typ, data := string(b[p+4:p+8]), b[p+8:p+8+n]
		if crc32.ChecksumIEEE(b[p+4:p+8+n]) != binary.BigEndian.Uint32(b[p+8+n:]) {
			return nil, fmt.Errorf("chunk %s: bad CRC", typ)
		}
		switch typ {
		case "tEXt":
			if k, v, ok := bytes.Cut(data, []byte{0}); ok {
				r := make([]rune, len(v))
				for i, c := range v {
					r[i] = rune(c)
				}
				out[string(k)] = string(r)
			}
		case "iTXt":
			if k, rest, ok := bytes.Cut(data, []byte{0}); ok && len(rest) >= 2 && rest[0] == 0 {
				rest = rest[2:]
				if _, rest, ok = bytes.Cut(rest, []byte{0}); ok { // language tag
					if _, v, ok := bytes.Cut(rest, []byte{0}); ok { // translated keyword
						out[string(k)] = string(v)
					}
				}
			}
		}
		p += 12 + n
	}
	return out, nil
}
