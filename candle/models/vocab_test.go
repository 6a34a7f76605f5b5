package models

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle/gguf"
	"github.com/rocm-go/rocm/errs"
)

// vocabFile is a GGUF file of a small SentencePiece-style vocabulary and
// kvs more.
func vocabFile(t testing.TB, kvs ...gguf.KV) []byte {
	meta := []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: []string{"<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "▁ab"}},
		{Key: "tokenizer.ggml.scores", Value: []float32{0, 0, 0, -3, -4, -5, -1, -0.5}},
		{Key: "tokenizer.ggml.token_type", Value: []int32{2, 3, 3, 1, 1, 1, 1, 1}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
	}
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, append(meta, kvs...), nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestGGUFVocab(t *testing.T) {
	f, err := gguf.Parse(vocabFile(t, gguf.KV{Key: "tokenizer.chat_template", Value: "{{ messages[0].content }}"}))
	require.NoError(t, err)
	v, err := ggufVocab(f)
	require.NoError(t, err)
	assert.Equal(t, "llama", v.Model)
	assert.Len(t, v.Tokens, 8)
	assert.Equal(t, []float32{0, 0, 0, -3, -4, -5, -1, -0.5}, v.Scores)
	assert.Equal(t, []int32{2, 3, 3, 1, 1, 1, 1, 1}, v.Types)
	assert.Equal(t, int32(1), v.BOS)
	assert.Equal(t, int32(2), v.EOS)
	assert.Equal(t, int32(-1), v.EOT)
	assert.True(t, v.AddBOS, "llama.cpp's default for a SentencePiece vocabulary with a BOS")
	assert.True(t, v.AddSpacePrefix)
	assert.Equal(t, "{{ messages[0].content }}", v.ChatTemplate)
	tok, err := ggufTokenizer(f)
	require.NoError(t, err)
	ids, err := tok.Encode("ab", true)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 7}, ids, "<s> ▁ab")

	for name, c := range map[string]struct {
		kv   gguf.KV
		kind error
		want string
	}{
		"id past the vocabulary": {gguf.KV{Key: "tokenizer.ggml.eot_token_id", Value: uint32(8)}, errs.ErrFormat, "tokenizer.ggml.eot_token_id = 8: the vocabulary has 8 tokens"},
		"a string id":            {gguf.KV{Key: "tokenizer.ggml.unknown_token_id", Value: "0"}, errs.ErrFormat, "want a non-negative integer"},
		"a bool flag of ints":    {gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: uint8(1)}, errs.ErrFormat, "want a bool"},
	} {
		f, err := gguf.Parse(vocabFile(t, c.kv))
		require.NoError(t, err, name)
		_, err = ggufVocab(f)
		assert.ErrorIs(t, err, c.kind, name)
		assert.ErrorContains(t, err, c.want, name)
	}
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.token_type", Value: []int32{-5}},
		{Key: "tokenizer.ggml.tokens", Value: []string{"a"}}}, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	f, err = gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	_, err = ggufVocab(f)
	assert.ErrorIs(t, err, errs.ErrFormat)
	assert.ErrorContains(t, err, "tokenizer.ggml.token_type[0] = -5")
	buf.Reset()
	w, err = gguf.NewWriter(&buf, []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}}, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	f, err = gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	_, err = ggufVocab(f)
	assert.ErrorIs(t, err, errs.ErrNotFound, "no tokens")
}

// FuzzGGUFVocab: no file makes the vocabulary's reading or the
// tokenizer's building crash.
func FuzzGGUFVocab(f *testing.F) {
	f.Add(vocabFile(f))
	f.Add(vocabFile(f, gguf.KV{Key: "tokenizer.ggml.merges", Value: []string{"▁ a", "a b"}}, gguf.KV{Key: "tokenizer.ggml.pre", Value: "llama-bpe"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := gguf.Parse(b)
		if err != nil {
			return
		}
		ggufTokenizer(file)
	})
}
