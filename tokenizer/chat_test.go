package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocm-go/rocm/errs"

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
		{Role: "system", Content: "You are a bot."}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: " Hi there! "}, {Role: "user", Content: "How are you?"},
	}
	convPlain = []Message{{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi!"}, {Role: "user", Content: "2+2?"}}
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
		_, err := renderFile(t, name, []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, true, spVars)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrTemplate)
		assert.Contains(t, err.Error(), "roles must alternate", name)
	}
	_, err := renderFile(t, "mistral", []Message{{Role: "user", Content: "u"}, {Role: "system", Content: "s"}}, true, spVars)
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

var weatherTool = Tool{Name: "get_weather", Description: "Get the weather in a city.",
	Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`)}

// The expectations are what transformers' apply_chat_template renders
// (jinja2 3.1 in its environment, tool call arguments decoded as vLLM
// does, content null as ""), for the same messages and tools.
func TestChatTemplateTools(t *testing.T) {
	l3 := []Message{{Role: "system", Content: "You are a bot."}, {Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`}}},
		{Role: "tool", ToolCallID: "call_1", Name: "get_weather", Content: `{"temp": 22}`}}
	got, err := renderTools(t, "llama3.1", l3, []Tool{weatherTool}, l3Vars)
	require.NoError(t, err)
	assert.Equal(t, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a bot.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get the weather in a city.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\",\n                    \"description\": \"The city\"\n                },\n                \"unit\": {\n                    \"type\": \"string\",\n                    \"enum\": [\n                        \"celsius\",\n                        \"fahrenheit\"\n                    ]\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 22}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", got)

	qw := []Message{{Role: "user", Content: "Weather and time in Paris?"},
		{Role: "assistant", Content: "Let me check.", ToolCalls: []ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris"}`}, {ID: "call_2", Name: "get_time", Arguments: `{}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: "22 C"}, {Role: "tool", ToolCallID: "call_2", Content: "14:00"}}
	got, err = renderTools(t, "qwen2.5", qw, []Tool{weatherTool, {Name: "get_time", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)}}, qwenVars)
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather in a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"The city\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather and time in Paris?<|im_end|>\n<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n22 C\n</tool_response>\n<tool_response>\n14:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n", got)

	// Llama 3.1's template takes one call a turn, and says so.
	l3[2].ToolCalls = append(l3[2].ToolCalls, ToolCall{ID: "call_2", Name: "get_weather", Arguments: `{"city": "Rome"}`})
	_, err = renderTools(t, "llama3.1", l3, []Tool{weatherTool}, l3Vars)
	assert.ErrorIs(t, err, ErrTemplate)
	assert.ErrorContains(t, err, "This model only supports single tool-calls at once!")
}

func TestChatTemplateToolErrors(t *testing.T) {
	bad := []Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: `{"a": `}}}}
	_, err := renderTools(t, "qwen2.5", bad, nil, qwenVars)
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "messages[1]")
	assert.ErrorContains(t, err, "tool_calls[0].arguments is not JSON")
	bad[1].ToolCalls[0].Arguments = `[1]`
	_, err = renderTools(t, "qwen2.5", bad, nil, qwenVars)
	assert.ErrorContains(t, err, "tool_calls[0].arguments is a list, not a JSON object")
	_, err = renderTools(t, "qwen2.5", bad[:1], []Tool{{Name: "f", Parameters: json.RawMessage(`{"type": `)}}, qwenVars)
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.ErrorContains(t, err, "tools[0]")
}

func TestChatTemplateTakesTools(t *testing.T) {
	for name, want := range map[string]bool{"llama3.1": true, "qwen2.5": true, "llama2": false, "mistral": false, "mistral-v3": true} {
		src, err := os.ReadFile(filepath.Join("testdata", "chat", name+".jinja"))
		require.NoError(t, err)
		c, err := NewChatTemplate(string(src), spVars)
		require.NoError(t, err)
		assert.Equal(t, want, c.TakesTools(), name)
		assert.Equal(t, string(src), c.Source())
	}
	_, err := NewChatTemplate("{% if %}", nil)
	assert.ErrorIs(t, err, ErrTemplate)
}

// renderTools renders testdata/chat/<name>.jinja with tools, as the
// model's ChatTemplate does.
func renderTools(t *testing.T, name string, msgs []Message, tools []Tool, vars map[string]string) (string, error) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "chat", name+".jinja"))
	require.NoError(t, err)
	tk := &Tokenizer{chatVar: vars}
	tk.setChatTemplate(string(src), name)
	c, err := tk.ChatTemplate()
	require.NoError(t, err)
	return c.Render(msgs, ChatOptions{AddGenerationPrompt: true, Tools: tools})
}
