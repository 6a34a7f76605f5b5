package tokenizer

import (
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/rocm-go/rocm/errs"
)

// pattern is a Split or Replace pattern of a tokenizer.json: a literal
// string or a regular expression.
//
// The Rust library compiles regular expressions with Oniguruma. The
// pre-tokenizer patterns of Llama 3, Qwen2 and GPT-2 need lookahead
// (\s+(?!\S)) and inline flags ((?i:'s|'t)), which Go's regexp (RE2) does
// not have, so they are compiled with dlclark/regexp2 in its default
// (.NET) syntax, whose \s, \p{L} and \p{N} are Unicode classes as in
// Oniguruma.
type pattern struct {
	literal string // when re is nil
	re      *regexp2.Regexp
	// fast is the hand-written matcher of a well-known pattern: the end
	// of the match at s[i:] (see fastsplit.go).
	fast func(s string, i int) int
}

func compilePattern(field string, literal *string, re *string) (*pattern, error) {
	switch {
	case re != nil:
		r, err := regexp2.Compile(*re, regexp2.None)
		if err != nil {
			return nil, &fieldError{kind: errs.ErrFormat, field: field + ".Regex", detail: "cannot compile " + quote(*re), err: err}
		}
		return &pattern{re: r, fast: fastSplits[*re]}, nil
	case literal != nil:
		return &pattern{literal: *literal}, nil
	}
	return nil, badField(field, "needs a String or a Regex")
}

// matches calls fn with the byte offsets of each non-empty match of p in
// s, left to right, without overlaps.
func (p *pattern) matches(s string, fn func(start, end int)) {
	if s == "" {
		return
	}
	if p.re == nil {
		if p.literal == "" {
			return
		}
		for off := 0; ; {
			i := strings.Index(s[off:], p.literal)
			if i < 0 {
				return
			}
			fn(off+i, off+i+len(p.literal))
			off += i + len(p.literal)
		}
	}
	if p.fast != nil {
		for i := 0; i < len(s); {
			e := p.fast(s, i)
			if e <= i { // cannot happen; never loop forever
				_, n := utf8.DecodeRuneInString(s[i:])
				e = i + n
			}
			fn(i, e)
			i = e
		}
		return
	}
	runes := []rune(s)
	m, err := p.re.FindRunesMatch(runes)
	// Rune indices to byte offsets: matches come in order, so walk once.
	// (An invalid byte is one rune, U+FFFD, in both []rune(s) and
	// DecodeRuneInString.)
	ri, bi := 0, 0
	advance := func(to int) int {
		for ri < to {
			_, n := utf8.DecodeRuneInString(s[bi:])
			bi += n
			ri++
		}
		return bi
	}
	for err == nil && m != nil {
		if m.Length > 0 {
			start := advance(m.Index)
			end := advance(m.Index + m.Length)
			fn(start, end)
		}
		m, err = p.re.FindNextMatch(m)
	}
	// regexp2 only fails on a timeout, and no timeout is set.
}

// replaceAll replaces every match of p in s with with.
func (p *pattern) replaceAll(s, with string) string {
	if p.re == nil {
		if p.literal == "" {
			return s
		}
		return strings.ReplaceAll(s, p.literal, with)
	}
	var sb strings.Builder
	last := 0
	p.matches(s, func(start, end int) {
		sb.WriteString(s[last:start])
		sb.WriteString(with)
		last = end
	})
	if last == 0 {
		return s
	}
	sb.WriteString(s[last:])
	return sb.String()
}
