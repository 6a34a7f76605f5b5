package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

var vocabCorpus = []string{
	"Hello world", " leading space", "Hello, world! How are you?", "numbers 12345 and 3.14159", "tabs\tand\nnewlines\n\n  two",
	"Ünïcödé ñ 日本語 😀", "it's they're I'm we'll", "code: func main() { fmt.Println(\"hi\") }", "   ", "a", "",
	"<|begin_of_text|>hi<|eot_id|>", "<s>hello</s>", "multiple   spaces   here", "UPPER lower MiXeD",
}

// vocabOf converts a testdata tokenizer.json into a GGUF-style vocabulary
// the way llama.cpp's converter does: tokens by id, added tokens as
// control tokens, and for SentencePiece models scores that order the
// merges as the file does.
func vocabOf(t *testing.T, dir, model string) Vocab {
	var doc struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", dir, "tokenizer.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	n := 0
	for _, id := range doc.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range doc.Added {
		n = max(n, a.ID+1)
	}
	v := Vocab{Model: model, Tokens: make([]string, n), Types: make([]int32, n), BOS: -1, EOS: -1, EOT: -1, Unknown: -1}
	for i := range v.Tokens {
		v.Tokens[i], v.Types[i] = "[PAD"+strings.Repeat("x", i)+"]", TypeUnused
	}
	for tok, id := range doc.Model.Vocab {
		v.Tokens[id], v.Types[id] = tok, TypeNormal
		if strings.HasPrefix(tok, "<0x") && len(tok) == 6 {
			v.Types[id] = TypeByte
		}
	}
	for _, a := range doc.Added {
		v.Tokens[a.ID], v.Types[a.ID] = a.Content, TypeControl
	}
	var merges []string
	if err := json.Unmarshal(doc.Model.Merges, &merges); err != nil {
		merges = nil
		var pairs [][2]string
		require.NoError(t, json.Unmarshal(doc.Model.Merges, &pairs))
		for _, p := range pairs {
			merges = append(merges, p[0]+" "+p[1])
		}
	}
	if model == "gpt2" {
		v.Merges = merges
		return v
	}
	v.Scores = make([]float32, n)
	for i := range v.Scores {
		v.Scores[i] = -1e9
	}
	for r, m := range merges {
		id := doc.Model.Vocab[strings.ReplaceAll(m, " ", "")]
		if v.Scores[id] == -1e9 {
			v.Scores[id] = -float32(r)
		}
	}
	return v
}

func TestFromVocabMatchesTokenizerJSON(t *testing.T) {
	for _, c := range []struct{ dir, model, pre string }{{"llama3", "gpt2", "llama-bpe"}, {"qwen2", "gpt2", "qwen2"}, {"llama2", "llama", ""}} {
		t.Run(c.dir, func(t *testing.T) {
			ref, err := Load(filepath.Join("testdata", c.dir, "tokenizer.json"))
			require.NoError(t, err)
			v := vocabOf(t, c.dir, c.model)
			v.Pre = c.pre
			v.AddSpacePrefix = c.model == "llama"
			if b, ok := ref.BOS(); ok {
				v.BOS, v.AddBOS = b, true
			}
			if c.dir == "qwen2" {
				v.AddBOS = false
			}
			tok, err := FromVocab(v)
			require.NoError(t, err)
			for _, s := range vocabCorpus {
				for _, special := range []bool{false, true} {
					want, err := ref.Encode(s, special)
					require.NoError(t, err)
					got, err := tok.Encode(s, special)
					require.NoError(t, err)
					assert.Equal(t, want, got, "%q special %v", s, special)
					assert.Equal(t, ref.Decode(want, false), tok.Decode(got, false), "%q", s)
				}
			}
		})
	}
}

func TestFromVocabErrors(t *testing.T) {
	base := Vocab{Model: "gpt2", Tokens: []string{"a", "b", "ab"}, Merges: []string{"a b"}, BOS: -1, EOS: -1, EOT: -1, Unknown: -1}
	_, err := FromVocab(base)
	require.NoError(t, err)
	for name, mod := range map[string]func(v *Vocab){
		"empty":      func(v *Vocab) { v.Tokens = nil },
		"types":      func(v *Vocab) { v.Types = []int32{1} },
		"scores":     func(v *Vocab) { v.Scores = []float32{1} },
		"bos":        func(v *Vocab) { v.BOS = 7 },
		"merge":      func(v *Vocab) { v.Merges = []string{"a c"} },
		"merge form": func(v *Vocab) { v.Merges = []string{"abc"} },
		"model":      func(v *Vocab) { v.Model = "wordpiece" },
		"pre":        func(v *Vocab) { v.Pre = "nonsense" },
		"dup":        func(v *Vocab) { v.Tokens = []string{"a", "a", "ab"} },
		"type":       func(v *Vocab) { v.Types = []int32{1, 9, 1} },
		"add bos":    func(v *Vocab) { v.AddBOS = true },
		"no scores":  func(v *Vocab) { v.Model = "llama" },
	} {
		t.Run(name, func(t *testing.T) {
			v := base
			mod(&v)
			_, err := FromVocab(v)
			assert.ErrorIs(t, err, errs.ErrFormat)
		})
	}
	names := PreNames()
	assert.True(t, sort.StringsAreSorted(names))
	assert.Contains(t, names, "llama-bpe")
}

func TestFromVocabChat(t *testing.T) {
	v := Vocab{Model: "gpt2", Tokens: []string{"a", "<s>", "</s>"}, Types: []int32{1, 3, 3}, BOS: 1, EOS: 2, EOT: -1, Unknown: -1, AddBOS: true,
		ChatTemplate: "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}{{ eos_token }}"}
	tok, err := FromVocab(v)
	require.NoError(t, err)
	s, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "a"}}, false)
	require.NoError(t, err)
	assert.Equal(t, "<s>a</s>", s)
	ids, err := tok.Encode("a", true)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 0}, ids)
	assert.Equal(t, []int32{2}, tok.EOS())
	v.ChatTemplate = ""
	tok, err = FromVocab(v)
	require.NoError(t, err)
	_, err = tok.ApplyChatTemplate(nil, false)
	assert.ErrorIs(t, err, ErrNoChatTemplate)
}
