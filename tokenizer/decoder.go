package tokenizer

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// A decoder turns the tokens of a sequence back into text, one stage of a
// chain. raw: keep byte-level and byte-fallback bytes as they are, even
// when they are not valid UTF-8 (the stream decoder converts them itself
// once it knows a character is complete); otherwise replace them with
// U+FFFD as the Rust library does.
type decoder interface {
	decodeChain(tokens []string, raw bool) []string
}

type decoderSeq []decoder

func (d decoderSeq) decodeChain(tokens []string, raw bool) []string {
	for _, x := range d {
		tokens = x.decodeChain(tokens, raw)
	}
	return tokens
}

// byteLevelDec maps byte-level characters back to bytes; a token with a
// character outside the byte-level alphabet (an added token) stays as it
// is.
type byteLevelDec struct{}

func (byteLevelDec) decodeChain(tokens []string, raw bool) []string {
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	buf := make([]byte, 0, n)
	for _, t := range tokens {
		start := len(buf)
		for _, c := range t {
			if c >= 0 && c < rune(len(charByte)) && charByte[c] >= 0 {
				buf = append(buf, byte(charByte[c]))
				continue
			}
			buf = append(buf[:start], t...)
			break
		}
	}
	s := string(buf)
	if !raw {
		s = lossyString(s)
	}
	return []string{s}
}

// byteFallbackDec turns runs of "<0xNN>" tokens into the text their bytes
// spell; a run that is not valid UTF-8 becomes one U+FFFD per byte, as in
// the Rust library.
type byteFallbackDec struct{}

func (byteFallbackDec) decodeChain(tokens []string, raw bool) []string {
	out := make([]string, 0, len(tokens))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		switch {
		case raw || utf8.Valid(run):
			out = append(out, string(run))
		default:
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range tokens {
		if b, ok := byteFallbackValue(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type fuseDec struct{}

func (fuseDec) decodeChain(tokens []string, raw bool) []string {
	return []string{strings.Join(tokens, "")}
}

// stripDec removes up to start leading and stop trailing occurrences of
// content from each token.
type stripDec struct {
	content     rune
	start, stop int
}

func (s stripDec) decodeChain(tokens []string, raw bool) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		for k := 0; k < s.start; k++ {
			c, n := utf8.DecodeRuneInString(t)
			if t == "" || c != s.content || c == utf8.RuneError && n == 1 {
				break
			}
			t = t[n:]
		}
		for k := 0; k < s.stop; k++ {
			c, n := utf8.DecodeLastRuneInString(t)
			if t == "" || c != s.content || c == utf8.RuneError && n == 1 {
				break
			}
			t = t[:len(t)-n]
		}
		out[i] = t
	}
	return out
}

// replaceDec applies a Replace to each token.
type replaceDec struct{ r replaceNorm }

func (d replaceDec) decodeChain(tokens []string, raw bool) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = d.r.normalize(t)
	}
	return out
}

// metaspaceDec turns the replacement character back into spaces, and drops
// it from the first token (which the pre-tokenizer prefixed) unless the
// prepend scheme is "never".
type metaspaceDec struct{ m metaspacePre }

func (d metaspaceDec) decodeChain(tokens []string, raw bool) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		with := " "
		if i == 0 && d.m.scheme != prependNever {
			with = ""
		}
		out[i] = strings.ReplaceAll(t, d.m.rep, with)
	}
	return out
}

func buildDecoder(field string, raw json.RawMessage) (decoder, error) {
	c, err := decodeComponent(field, raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		seq, err := buildSeq(field+".decoders", c.Decoders, buildDecoder)
		if err != nil {
			return nil, err
		}
		return decoderSeq(seq), nil
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, badField(field+".content", "needs one character")
		}
		if c.Start < 0 || c.Stop < 0 {
			return nil, badField(field, "start %d and stop %d cannot be negative", c.Start, c.Stop)
		}
		r, _ := utf8.DecodeRuneInString(*c.Content)
		return stripDec{r, c.Start, c.Stop}, nil
	case "Replace":
		r, err := replaceOf(field, c)
		if err != nil {
			return nil, err
		}
		return replaceDec{r}, nil
	case "Metaspace":
		m, err := metaspaceOf(field, c)
		if err != nil {
			return nil, err
		}
		return metaspaceDec{m}, nil
	}
	return nil, unsupported(field+".type", "decoder %q is not supported (Sequence, ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace are)", c.Type)
}
