package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renderFile renders testdata/chat/<name>.jinja as ApplyChatTemplate does.
func renderFile(t *testing.T, name string, msgs []Message, gen bool, vars map[string]string) (string, error) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "chat", name+".jinja"))
	require.NoError(t, err)
	tk := &Tokenizer{chatVar: vars}
	tk.setChatTemplate(string(src), name)
	return tk.ApplyChatTemplate(msgs, gen)
}

var (
	convSystem = []Message{
		{"system", "You are a bot."}, {"user", "Hello"}, {"assistant", " Hi there! "}, {"user", "How are you?"},
	}
	convPlain = []Message{{"user", "Hello"}, {"assistant", "Hi!"}, {"user", "2+2?"}}
	spVars    = map[string]string{"bos_token": "<s>", "eos_token": "</s>"}
	l3Vars    = map[string]string{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
	qwenVars  = map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
)

// The expectations are the output of Python's jinja2 3.1 with the
// environment transformers uses (trim_blocks, lstrip_blocks), which are
// also the prompts these models' documentation shows.
func TestChatTemplates(t *testing.T) {
	cases := []struct {
		tmpl string
		msgs []Message
		gen  bool
		vars map[string]string
		want string
	}{
		{"llama2", convSystem, true, spVars,
			"<s>[INST] <<SYS>>\nYou are a bot.\n<</SYS>>\n\nHello [/INST] Hi there! </s><s>[INST] How are you? [/INST]"},
		{"llama2", convPlain, false, spVars,
			"<s>[INST] Hello [/INST] Hi! </s><s>[INST] 2+2? [/INST]"},
		{"mistral", convPlain, true, spVars,
			"<s>[INST] Hello [/INST]Hi!</s>[INST] 2+2? [/INST]"},
		{"mistral-v3", convSystem, true, spVars,
			"<s>[INST] Hello[/INST] Hi there!</s>[INST] You are a bot.\n\nHow are you?[/INST]"},
		{"mistral-v3", convPlain, true, spVars,
			"<s>[INST] Hello[/INST] Hi!</s>[INST] 2+2?[/INST]"},
		{"qwen2.5", convSystem, true, qwenVars,
			"<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen2.5", convPlain, false, qwenVars,
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"},
		{"llama3.1", convSystem, true, l3Vars,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a bot.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3.1", convPlain[:1], false, l3Vars,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"},
	}
	for _, c := range cases {
		got, err := renderFile(t, c.tmpl, c.msgs, c.gen, c.vars)
		require.NoError(t, err, c.tmpl)
		assert.Equal(t, c.want, got, c.tmpl)
	}
}

func TestChatTemplateRaises(t *testing.T) {
	for _, name := range []string{"llama2", "mistral", "mistral-v3"} {
		_, err := renderFile(t, name, []Message{{"user", "a"}, {"user", "b"}}, true, spVars)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrTemplate)
		assert.Contains(t, err.Error(), "roles must alternate", name)
	}
	_, err := renderFile(t, "mistral", []Message{{"user", "u"}, {"system", "s"}}, true, spVars)
	assert.ErrorContains(t, err, "Only user and assistant roles are supported!")
}

func TestNoChatTemplate(t *testing.T) {
	why := errors.New("x")
	tk := &Tokenizer{chatErr: why}
	out, err := tk.ApplyChatTemplate(nil, true)
	assert.ErrorIs(t, err, why) // the reason found at load time, as it is
	assert.Empty(t, out)
}

func fixedNow(t *testing.T) {
	old := now
	now = func() time.Time { return time.Date(2025, 3, 7, 14, 5, 9, 0, time.UTC) }
	t.Cleanup(func() { now = old })
}
