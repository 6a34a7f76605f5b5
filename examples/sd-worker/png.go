package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"strings"
)

// params are a generation's settings as AUTOMATIC1111 writes them into
// its PNGs and its "info", so that a PNG from this worker dropped on
// A1111's "PNG Info" tab (or read by any tool that speaks the format)
// gives the settings back.
type params struct {
	Prompt, NegativePrompt string
	Steps                  int
	Sampler                string // A1111's name ("Euler a")
	CFGScale               float64
	Seed                   uint64
	Width, Height          int
	Model                  string
	Strength               float64 // img2img and inpainting: the denoising strength; 0: none
}

// infotext is p in A1111's form: the prompt, the negative prompt's line
// when there is one, and the settings on one line.
func (p params) infotext() string {
	var b strings.Builder
	b.WriteString(p.Prompt)
	if p.NegativePrompt != "" {
		b.WriteString("\nNegative prompt: ")
		b.WriteString(p.NegativePrompt)
	}
	fmt.Fprintf(&b, "\nSteps: %d, Sampler: %s, CFG scale: %s, Seed: %d, Size: %dx%d, Model: %s",
		p.Steps, p.Sampler, trimFloat(p.CFGScale), p.Seed, p.Width, p.Height, quoteInfo(p.Model))
	if p.Strength > 0 {
		fmt.Fprintf(&b, ", Denoising strength: %s", trimFloat(p.Strength))
	}
	return b.String()
}

// trimFloat writes 7 as "7" and 7.5 as "7.5", as A1111 does.
func trimFloat(f float64) string { return fmt.Sprintf("%g", f) }

// quoteInfo quotes a value that holds the separators of the settings
// line, as A1111's infotext parser expects.
func quoteInfo(s string) string {
	if strings.ContainsAny(s, ",:\"\n") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// encodePNG writes img as a PNG with a "parameters" tEXt chunk holding
// text (Latin-1 in tEXt, as PNG wants; an iTXt chunk, UTF-8, when text
// has characters beyond Latin-1, as A1111 does).
func encodePNG(img image.Image, text string) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	// The chunk goes after IHDR: 8 bytes of signature, then IHDR's 4-byte
	// length, type, 13 bytes of data and CRC.
	const afterIHDR = 8 + 4 + 4 + 13 + 4
	if len(b) < afterIHDR || string(b[12:16]) != "IHDR" {
		return nil, fmt.Errorf("the PNG encoder wrote no IHDR first")
	}
	var chunk []byte
	if latin1, ok := toLatin1(text); ok {
		chunk = pngChunk("tEXt", append([]byte("parameters\x00"), latin1...))
	} else {
		// keyword, NUL, compression flag 0, method 0, empty language tag
		// and translated keyword (each NUL-terminated), then UTF-8.
		chunk = pngChunk("iTXt", append([]byte("parameters\x00\x00\x00\x00\x00"), text...))
	}
	out := make([]byte, 0, len(b)+len(chunk))
	out = append(out, b[:afterIHDR]...)
	out = append(out, chunk...)
	return append(out, b[afterIHDR:]...), nil
}

func pngChunk(typ string, data []byte) []byte {
	c := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	c = append(c, typ...)
	c = append(c, data...)
	return binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
}

func toLatin1(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return nil, false
		}
		out = append(out, byte(r))
	}
	return out, true
}
