package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

// testdata/clip is a CLIP tokenizer folder cut down from OpenAI's CLIP
// vocabulary to what its prompts need, with their ids from OpenAI's own
// tokenizer (testdata/clip/make.py).
func loadCLIPGolden(t *testing.T) []struct {
	Text string
	IDs  []int32
} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "clip", "golden.json"))
	require.NoError(t, err)
	var g []struct {
		Text string
		IDs  []int32
	}
	require.NoError(t, json.Unmarshal(b, &g))
	require.NotEmpty(t, g)
	return g
}

func TestCLIPAgainstOpenAI(t *testing.T) {
	tok, err := LoadDir(filepath.Join("testdata", "clip"))
	require.NoError(t, err)
	bos, ok := tok.BOS()
	require.True(t, ok)
	assert.Equal(t, int32(49406), bos)
	assert.Equal(t, []int32{49407}, tok.EOS())
	pad, ok := tok.Pad()
	require.True(t, ok)
	assert.Equal(t, int32(49407), pad, "SD 1.5 pads with <|endoftext|>")
	for _, g := range loadCLIPGolden(t) {
		ids, err := tok.Encode(g.Text, false)
		require.NoError(t, err)
		if len(g.IDs) == 0 {
			assert.Empty(t, ids, "%q", g.Text)
		} else {
			assert.Equal(t, g.IDs, ids, "%q", g.Text)
		}
		with, err := tok.Encode(g.Text, true)
		require.NoError(t, err)
		assert.Equal(t, append(append([]int32{49406}, g.IDs...), 49407), with, "%q with the special tokens", g.Text)
	}
	// Decoding gives the normalized text back, words ending where "</w>" was.
	ids, err := tok.Encode("A photo   of a CAT", false)
	require.NoError(t, err)
	assert.Equal(t, "a</w>photo</w>of</w>a</w>cat</w>", tok.Decode(ids, true))
}

func TestEncodeWindows(t *testing.T) {
	tok, err := LoadDir(filepath.Join("testdata", "clip"))
	require.NoError(t, err)
	golden := loadCLIPGolden(t)
	var long []int32
	var longText string
	for _, g := range golden {
		if len(g.IDs) > len(long) {
			long, longText = g.IDs, g.Text
		}
	}
	require.Greater(t, len(long), 75, "the golden prompts include one over a window")
	w, err := tok.EncodeWindows(longText, 77)
	require.NoError(t, err)
	require.Len(t, w, (len(long)+74)/75)
	for i, win := range w {
		require.Len(t, win, 77)
		assert.Equal(t, int32(49406), win[0])
		body := long[i*75 : min((i+1)*75, len(long))]
		assert.Equal(t, body, win[1:1+len(body)], "window %d", i)
		assert.Equal(t, int32(49407), win[1+len(body)])
		for _, p := range win[2+len(body):] {
			assert.Equal(t, int32(49407), p)
		}
	}
	// Empty text is one window: BOS, EOS, padding.
	w, err = tok.EncodeWindows("", 77)
	require.NoError(t, err)
	require.Len(t, w, 1)
	assert.Equal(t, []int32{49406, 49407, 49407}, w[0][:3])

	_, err = tok.EncodeWindows("a", 2)
	assert.ErrorIs(t, err, errs.ErrArgument)
	gpt2, err := Load(filepath.Join("testdata", "gpt2.json"))
	require.NoError(t, err)
	_, err = gpt2.EncodeWindows("a", 77)
	assert.ErrorIs(t, err, errs.ErrUnsupported)
}

// SD 2.x's and XL's second tokenizer pad with "!" (id 0).
func TestCLIPPadFromConfig(t *testing.T) {
	dir := clipDir(t, map[string]string{"tokenizer_config.json": `{"bos_token": {"content": "<|startoftext|>"}, "eos_token": "<|endoftext|>", "pad_token": "!", "tokenizer_class": "CLIPTokenizer"}`})
	tok, err := LoadDir(dir)
	require.NoError(t, err)
	pad, ok := tok.Pad()
	require.True(t, ok)
	assert.Equal(t, int32(0), pad)
	w, err := tok.EncodeWindows("a photo of a cat", 77)
	require.NoError(t, err)
	assert.Equal(t, []int32{49406, 320, 1125, 539, 320, 2368, 49407, 0, 0}, w[0][:9])
}

// clipDir is a folder of testdata/clip's vocab.json and merges.txt, with
// files written over or beside them.
func clipDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"vocab.json", "merges.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "clip", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return dir
}

func TestCLIPFolderErrors(t *testing.T) {
	for _, c := range []struct {
		files map[string]string
		kind  error
		field string
		text  string
	}{
		{map[string]string{"tokenizer_config.json": `{"tokenizer_class": "GPT2Tokenizer"}`}, errs.ErrUnsupported, "tokenizer_class", "only CLIP tokenizers"},
		{map[string]string{"tokenizer_config.json": `{"bos_token": "<s>"}`}, errs.ErrFormat, "bos_token", `"<s>" is not in the vocabulary`},
		{map[string]string{"vocab.json": `[1, 2]`}, errs.ErrFormat, "", "not a JSON object of token ids"},
		{map[string]string{"merges.txt": "#version: 0.2\na b c\n"}, errs.ErrFormat, "", `line 2 is "a b c"`},
	} {
		_, err := LoadDir(clipDir(t, c.files))
		require.ErrorIs(t, err, c.kind, "%v", c.files)
		assert.ErrorContains(t, err, c.text)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, c.field, e.Field)
	}
	// Without tokenizer_config.json: OpenAI's special tokens.
	tok, err := LoadDir(clipDir(t, nil))
	require.NoError(t, err)
	bos, _ := tok.BOS()
	assert.Equal(t, int32(49406), bos)
	_, ok := tok.Pad()
	assert.False(t, ok, "no pad_token: no padding")
}
