package models

import (
	"fmt"

	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/tokenizer"
)

// ggufVocab reads a GGUF file's tokenizer (the tokenizer.ggml.* keys and
// tokenizer.chat_template) as a tokenizer.Vocab.
func ggufVocab(f *gguf.File) (tokenizer.Vocab, error) {
	v := tokenizer.Vocab{BOS: -1, EOS: -1, EOT: -1, Unknown: -1}
	var err error
	if v.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return v, err
	}
	if v.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return v, err
	}
	opt := func(key string) bool { _, ok := f.Get(key); return ok }
	bad := func(key, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: "Checkpoint.Tokenizer", Kind: errs.ErrFormat, Path: f.Path(), Field: key, Detail: fmt.Sprintf(format, args...)}
	}
	if opt("tokenizer.ggml.pre") {
		if v.Pre, err = f.String("tokenizer.ggml.pre"); err != nil {
			return v, err
		}
	}
	if opt("tokenizer.ggml.scores") {
		s, err := f.Floats("tokenizer.ggml.scores")
		if err != nil {
			return v, err
		}
		v.Scores = make([]float32, len(s))
		for i, x := range s {
			v.Scores[i] = float32(x)
		}
	}
	if opt("tokenizer.ggml.token_type") {
		t, err := f.Ints("tokenizer.ggml.token_type")
		if err != nil {
			return v, err
		}
		v.Types = make([]int32, len(t))
		for i, x := range t {
			if x < 0 || x > 1<<16 {
				return v, bad("tokenizer.ggml.token_type", "tokenizer.ggml.token_type[%d] = %d: want a token type from 0 to 65536", i, x)
			}
			v.Types[i] = int32(x)
		}
	}
	if opt("tokenizer.ggml.merges") {
		if v.Merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return v, err
		}
	}
	for _, id := range []struct {
		key string
		dst *int32
	}{{"bos_token_id", &v.BOS}, {"eos_token_id", &v.EOS}, {"eot_token_id", &v.EOT}, {"unknown_token_id", &v.Unknown}} {
		key := "tokenizer.ggml." + id.key
		if !opt(key) {
			continue
		}
		u, err := f.Uint(key)
		if err != nil {
			return v, err
		}
		if u >= uint64(len(v.Tokens)) {
			return v, bad(key, "%s = %d: the vocabulary has %d tokens", key, u, len(v.Tokens))
		}
		*id.dst = int32(u)
	}
	// llama.cpp's defaults: a BOS and a space prefix for SentencePiece
	// vocabularies, neither for byte-level ones.
	v.AddBOS = v.Model == "llama" && v.BOS >= 0
	v.AddSpacePrefix = v.Model == "llama"
	for _, b := range []struct {
		key string
		dst *bool
	}{{"tokenizer.ggml.add_bos_token", &v.AddBOS}, {"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix}} {
		if opt(b.key) {
			if *b.dst, err = f.Bool(b.key); err != nil {
				return v, err
			}
		}
	}
	if opt("tokenizer.chat_template") {
		if v.ChatTemplate, err = f.String("tokenizer.chat_template"); err != nil {
			return v, err
		}
	}
	return v, nil
}

// ggufTokenizer builds a GGUF file's tokenizer (ggufVocab, then
// tokenizer.FromVocab).
func ggufTokenizer(f *gguf.File) (*tokenizer.Tokenizer, error) {
	v, err := ggufVocab(f)
	if err != nil {
		return nil, err
	}
	return tokenizer.FromVocab(v)
}
