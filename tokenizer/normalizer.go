package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/rocm-go/rocm/errs"
)

// A normalizer rewrites a piece of input text before pre-tokenization.
type normalizer interface {
	normalize(s string) string
}

type normalizerSeq []normalizer

func (n normalizerSeq) normalize(s string) string {
	for _, x := range n {
		s = x.normalize(s)
	}
	return s
}

// prependNorm puts its string before every non-empty piece (Llama 2's "▁").
type prependNorm string

func (p prependNorm) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(p) + s
}

type replaceNorm struct {
	pat  *pattern
	with string
}

func (r replaceNorm) normalize(s string) string { return r.pat.replaceAll(s, r.with) }

// unicodeNorm is NFC, NFD, NFKC or NFKD. Go's standard library has no
// Unicode normalization; golang.org/x/text/unicode/norm is the Go team's.
type unicodeNorm struct{ form norm.Form }

func (u unicodeNorm) normalize(s string) string { return u.form.String(s) }

type lowercaseNorm struct{}

func (lowercaseNorm) normalize(s string) string { return strings.ToLower(s) }

type stripNorm struct{ left, right bool }

func (st stripNorm) normalize(s string) string {
	if st.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if st.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// byteLevelNorm maps every byte to its byte-level character.
type byteLevelNorm struct{}

func (byteLevelNorm) normalize(s string) string { return byteLevel(s) }

// component is the union of the fields of the normalizers, pre-tokenizers,
// post-processors and decoders of a tokenizer.json, each a JSON object
// with a "type".
type component struct {
	Type string `json:"type"`

	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`

	Prepend  *string      `json:"prepend"`
	Pattern  *jsonPattern `json:"pattern"`
	Content  *string      `json:"content"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`

	AddPrefixSpace *bool   `json:"add_prefix_space"`
	UseRegex       *bool   `json:"use_regex"`
	Replacement    *string `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	Split          *bool   `json:"split"`

	IndividualDigits bool `json:"individual_digits"`

	Start int   `json:"start"`
	Stop  int   `json:"stop"`
	Left  *bool `json:"left"`
	Right *bool `json:"right"`

	Single        json.RawMessage             `json:"single"`
	SpecialTokens map[string]jsonSpecialToken `json:"special_tokens"`
	Sep           json.RawMessage             `json:"sep"`
	Cls           json.RawMessage             `json:"cls"`
}

type jsonPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type jsonSpecialToken struct {
	ID     string   `json:"id"`
	IDs    []int32  `json:"ids"`
	Tokens []string `json:"tokens"`
}

// isNull reports whether a JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// buildSeq builds the components of a Sequence's list (field names it),
// skipping nulls.
func buildSeq[T any](field string, raws []json.RawMessage, build func(string, json.RawMessage) (T, error)) ([]T, error) {
	var seq []T
	for i, r := range raws {
		if isNull(r) {
			continue
		}
		x, err := build(fmt.Sprintf("%s[%d]", field, i), r)
		if err != nil {
			return nil, err
		}
		seq = append(seq, x)
	}
	return seq, nil
}

// patternOf compiles the "pattern" of a Split or Replace component.
func patternOf(field string, c *component) (*pattern, error) {
	if c.Pattern == nil {
		return nil, badField(field+".pattern", "missing")
	}
	return compilePattern(field+".pattern", c.Pattern.String, c.Pattern.Regex)
}

// replaceOf reads a Replace normalizer or decoder.
func replaceOf(field string, c *component) (replaceNorm, error) {
	p, err := patternOf(field, c)
	if err != nil {
		return replaceNorm{}, err
	}
	if c.Content == nil {
		return replaceNorm{}, badField(field+".content", "missing")
	}
	return replaceNorm{p, *c.Content}, nil
}

func decodeComponent(field string, raw json.RawMessage) (*component, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, &fieldError{kind: errs.ErrFormat, field: field, detail: "not a valid component object", err: err}
	}
	if c.Type == "" {
		return nil, badField(field, "has no \"type\"")
	}
	return &c, nil
}

func buildNormalizer(field string, raw json.RawMessage) (normalizer, error) {
	c, err := decodeComponent(field, raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		seq, err := buildSeq(field+".normalizers", c.Normalizers, buildNormalizer)
		if err != nil {
			return nil, err
		}
		return normalizerSeq(seq), nil
	case "Prepend":
		if c.Prepend == nil {
			return nil, badField(field+".prepend", "missing")
		}
		return prependNorm(*c.Prepend), nil
	case "Replace":
		r, err := replaceOf(field, c)
		if err != nil {
			return nil, err
		}
		return r, nil
	case "NFC":
		return unicodeNorm{norm.NFC}, nil
	case "NFD":
		return unicodeNorm{norm.NFD}, nil
	case "NFKC":
		return unicodeNorm{norm.NFKC}, nil
	case "NFKD":
		return unicodeNorm{norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNorm{}, nil
	case "Strip":
		return stripNorm{left: c.Left == nil || *c.Left, right: c.Right == nil || *c.Right}, nil
	case "ByteLevel":
		return byteLevelNorm{}, nil
	}
	return nil, unsupported(field+".type", "normalizer %q is not supported (Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, Strip, ByteLevel are)", c.Type)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
