package tokenizer

import (
	"encoding/json"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// piece is a span of (normalized) text on its way to the model.
type piece struct {
	s string
	// first: the piece starts the input text (Metaspace's "first" scheme
	// adds its prefix only there).
	first bool
	// byteLevel: s still needs its bytes mapped to byte-level characters.
	// ByteLevel leaves that to the model, which maps into a reused buffer
	// (no string per word); a later pre-tokenizer gets mapped text.
	byteLevel bool
}

// mapped returns p with its byte-level mapping done.
func (p piece) mapped() piece {
	if p.byteLevel {
		p.s, p.byteLevel = byteLevel(p.s), false
	}
	return p
}

// A preTokenizer breaks a piece into the pieces the model encodes one by
// one, appending them (never empty ones) to dst.
type preTokenizer interface {
	split(dst []piece, p piece) []piece
}

// behavior is what a split does with the matches of its pattern.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{
	"Removed": removed, "Isolated": isolated, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous,
}

type segment struct {
	start, end int
	match      bool
}

// splitSegments applies behavior b to segs (which cover p.s in order) and
// appends the resulting pieces to dst, as the Rust library's
// NormalizedString::split does.
func splitSegments(dst []piece, p piece, segs []segment, b behavior) []piece {
	var out []segment
	switch b {
	case removed:
		for _, s := range segs {
			if !s.match {
				out = append(out, s)
			}
		}
	case isolated:
		out = segs
	case contiguous:
		for i, s := range segs {
			if i > 0 && s.match == segs[i-1].match {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
		}
	case mergedWithPrevious:
		prev := false
		for _, s := range segs {
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
			prev = s.match
		}
	case mergedWithNext:
		prev := false
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1].start = s.start
			} else {
				out = append(out, s)
			}
			prev = s.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	for _, s := range out {
		if s.end > s.start {
			dst = append(dst, piece{s: p.s[s.start:s.end], first: p.first && s.start == 0, byteLevel: p.byteLevel})
		}
	}
	return dst
}

// patternSegments covers s with the matches of pat and the gaps between
// them; invert swaps the two.
func patternSegments(s string, pat *pattern, invert bool) []segment {
	var segs []segment
	last := 0
	pat.matches(s, func(start, end int) {
		if start > last {
			segs = append(segs, segment{last, start, invert})
		}
		segs = append(segs, segment{start, end, !invert})
		last = end
	})
	if last < len(s) {
		segs = append(segs, segment{last, len(s), invert})
	}
	return segs
}

// charSegments covers s with one segment per character that is(c) and the
// runs between them.
func charSegments(s string, is func(rune) bool) []segment {
	var segs []segment
	last := 0
	for i, c := range s {
		if is(c) {
			if i > last {
				segs = append(segs, segment{last, i, false})
			}
			n := utf8.RuneLen(c)
			if c == utf8.RuneError {
				n = 1
			}
			segs = append(segs, segment{i, i + n, true})
			last = i + n
		}
	}
	if last < len(s) {
		segs = append(segs, segment{last, len(s), false})
	}
	return segs
}

type preSeq []preTokenizer

func (q preSeq) split(dst []piece, p piece) []piece {
	if len(q) == 0 {
		return append(dst, p)
	}
	cur := []piece{p}
	var next []piece
	for k, pt := range q {
		if k == len(q)-1 {
			for _, c := range cur {
				dst = pt.split(dst, c)
			}
			break
		}
		next = next[:0]
		for _, c := range cur {
			next = pt.split(next, c)
		}
		for i := range next {
			next[i] = next[i].mapped()
		}
		cur, next = next, cur
	}
	return dst
}

type splitPre struct {
	pat    *pattern
	b      behavior
	invert bool
}

func (sp splitPre) split(dst []piece, p piece) []piece {
	p = p.mapped()
	if sp.b == isolated && sp.pat.fast != nil {
		// Every match is a piece, and the matches tile the text.
		sp.pat.matches(p.s, func(start, end int) {
			dst = append(dst, piece{s: p.s[start:end], first: p.first && start == 0})
		})
		return dst
	}
	return splitSegments(dst, p, patternSegments(p.s, sp.pat, sp.invert), sp.b)
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own split (use_regex).
var gpt2Pattern = sync.OnceValue(func() *pattern {
	return &pattern{re: regexp2.MustCompile(gpt2Split, regexp2.None), fast: matchGPT2}
})

type byteLevelPre struct{ addPrefixSpace, useRegex bool }

func (bl byteLevelPre) split(dst []piece, p piece) []piece {
	p = p.mapped()
	if bl.addPrefixSpace && p.s != "" && p.s[0] != ' ' {
		p.s = " " + p.s
	}
	n := len(dst)
	if bl.useRegex {
		dst = splitPre{gpt2Pattern(), isolated, false}.split(dst, p)
	} else if p.s != "" {
		dst = append(dst, p)
	}
	for i := n; i < len(dst); i++ {
		dst[i].byteLevel = true
	}
	return dst
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

type metaspacePre struct {
	rep    string
	scheme prependScheme
	split_ bool
}

func (m metaspacePre) split(dst []piece, p piece) []piece {
	p = p.mapped()
	s := strings.ReplaceAll(p.s, " ", m.rep)
	if s != "" && !strings.HasPrefix(s, m.rep) &&
		(m.scheme == prependAlways || m.scheme == prependFirst && p.first) {
		s = m.rep + s
	}
	p.s = s
	if !m.split_ {
		if s != "" {
			dst = append(dst, p)
		}
		return dst
	}
	return splitSegments(dst, p, patternSegments(s, &pattern{literal: m.rep}, false), mergedWithNext)
}

type digitsPre struct{ individual bool }

func (d digitsPre) split(dst []piece, p piece) []piece {
	p = p.mapped()
	b := contiguous
	if d.individual {
		b = isolated
	}
	return splitSegments(dst, p, charSegments(p.s, unicode.IsNumber), b)
}

type whitespaceSplitPre struct{}

func (whitespaceSplitPre) split(dst []piece, p piece) []piece {
	p = p.mapped()
	return splitSegments(dst, p, charSegments(p.s, unicode.IsSpace), removed)
}

func buildPreTokenizer(field string, raw json.RawMessage) (preTokenizer, error) {
	c, err := decodeComponent(field, raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		seq, err := buildSeq(field+".pretokenizers", c.Pretokenizers, buildPreTokenizer)
		if err != nil {
			return nil, err
		}
		return preSeq(seq), nil
	case "Split":
		p, err := patternOf(field, c)
		if err != nil {
			return nil, err
		}
		b, ok := behaviors[c.Behavior]
		if !ok {
			return nil, badField(field+".behavior", "%q is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", c.Behavior)
		}
		return splitPre{p, b, c.Invert}, nil
	case "ByteLevel":
		return byteLevelPre{
			addPrefixSpace: c.AddPrefixSpace == nil || *c.AddPrefixSpace,
			useRegex:       c.UseRegex == nil || *c.UseRegex,
		}, nil
	case "Metaspace":
		m, err := metaspaceOf(field, c)
		if err != nil {
			return nil, err
		}
		return m, nil
	case "Digits":
		return digitsPre{c.IndividualDigits}, nil
	case "WhitespaceSplit":
		return whitespaceSplitPre{}, nil
	}
	return nil, unsupported(field+".type", "pre-tokenizer %q is not supported (Sequence, Split, ByteLevel, Metaspace, Digits, WhitespaceSplit are)", c.Type)
}

// metaspaceOf reads a Metaspace pre-tokenizer or decoder, with the Rust
// library's defaults (prepend_scheme "always", split true) and its legacy
// add_prefix_space field.
func metaspaceOf(field string, c *component) (metaspacePre, error) {
	m := metaspacePre{rep: "▁", scheme: prependAlways, split_: true}
	if c.Replacement != nil {
		if utf8.RuneCountInString(*c.Replacement) != 1 {
			return m, badField(field+".replacement", "%q is not one character", *c.Replacement)
		}
		m.rep = *c.Replacement
	}
	if c.PrependScheme != nil {
		switch *c.PrependScheme {
		case "always":
			m.scheme = prependAlways
		case "first":
			m.scheme = prependFirst
		case "never":
			m.scheme = prependNever
		default:
			return m, badField(field+".prepend_scheme", "%q is not one of first, always, never", *c.PrependScheme)
		}
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		if c.PrependScheme != nil && m.scheme != prependNever {
			return m, badField(field+".add_prefix_space", "false does not match prepend_scheme %q", *c.PrependScheme)
		}
		m.scheme = prependNever
	}
	if c.Split != nil {
		m.split_ = *c.Split
	}
	return m, nil
}
