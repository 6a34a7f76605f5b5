package tokenizer

import (
	"encoding/json"
	"fmt"

	"github.com/rocm-go/rocm/errs"
)

// A postProcessor adds the special tokens of a sequence (Encode with
// addSpecial).
type postProcessor interface {
	process(ids []int32) []int32
}

type postSeq []postProcessor

func (p postSeq) process(ids []int32) []int32 {
	for _, x := range p {
		ids = x.process(ids)
	}
	return ids
}

// templatePost is TemplateProcessing's "single" template: special tokens'
// ids around the sequence (a nil entry).
type templatePost [][]int32

func (t templatePost) process(ids []int32) []int32 {
	n := len(ids)
	for _, s := range t {
		n += len(s)
	}
	out := make([]int32, 0, n)
	for _, s := range t {
		if s == nil {
			out = append(out, ids...)
		} else {
			out = append(out, s...)
		}
	}
	return out
}

// leadingSpecial returns the ids the template puts before the sequence.
func (t templatePost) leadingSpecial() []int32 {
	var lead []int32
	for _, s := range t {
		if s == nil {
			break
		}
		lead = append(lead, s...)
	}
	return lead
}

// identityPost is the ByteLevel post-processor, which only trims offsets.
type identityPost struct{}

func (identityPost) process(ids []int32) []int32 { return ids }

type templateItem struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

func buildPostProcessor(field string, raw json.RawMessage) (postProcessor, error) {
	c, err := decodeComponent(field, raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		seq, err := buildSeq(field+".processors", c.Processors, buildPostProcessor)
		if err != nil {
			return nil, err
		}
		return postSeq(seq), nil
	case "ByteLevel":
		return identityPost{}, nil
	case "TemplateProcessing":
		var items []templateItem
		if err := json.Unmarshal(c.Single, &items); err != nil {
			return nil, &fieldError{kind: errs.ErrFormat, field: field + ".single", detail: "not a list of SpecialToken and Sequence items", err: err}
		}
		var t templatePost
		seq := false
		for i, it := range items {
			f := fmt.Sprintf("%s.single[%d]", field, i)
			switch {
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, badField(f, "special token %q is not in %s.special_tokens", it.SpecialToken.ID, field)
				}
				t = append(t, append([]int32{}, st.IDs...))
			case it.Sequence != nil:
				if it.Sequence.ID != "A" {
					return nil, badField(f, "sequence %q: a single sequence's template can only name A", it.Sequence.ID)
				}
				if seq {
					return nil, badField(f, "names the sequence twice")
				}
				seq = true
				t = append(t, nil)
			default:
				return nil, badField(f, "neither SpecialToken nor Sequence")
			}
		}
		if !seq {
			return nil, badField(field+".single", "does not contain the sequence (A)")
		}
		return t, nil
	case "BertProcessing", "RobertaProcessing":
		var ids [2]int32
		for k, x := range []json.RawMessage{c.Cls, c.Sep} {
			name := [2]string{"cls", "sep"}[k]
			var pair []any
			if err := json.Unmarshal(x, &pair); err != nil || len(pair) != 2 {
				return nil, badField(field+"."+name, "needs a [token, id] pair")
			}
			id, ok := pair[1].(float64)
			if !ok || id < 0 || id != float64(int32(id)) {
				return nil, badField(field+"."+name, "needs a [token, id] pair with a valid id")
			}
			ids[k] = int32(id)
		}
		return templatePost{{ids[0]}, nil, {ids[1]}}, nil
	}
	return nil, unsupported(field+".type", "post-processor %q is not supported (Sequence, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing are)", c.Type)
}

// bosOf returns the id a post-processor puts first, if any.
func bosOf(p postProcessor) (int32, bool) {
	switch x := p.(type) {
	case templatePost:
		if lead := x.leadingSpecial(); len(lead) > 0 {
			return lead[0], true
		}
	case postSeq:
		for _, y := range x {
			if id, ok := bosOf(y); ok {
				return id, true
			}
		}
	}
	return 0, false
}
