package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/tokenizer"
)

// toolFake is a fake backend with a real chat template
// (tokenizer/testdata/chat/<tmpl>.jinja) whose generation is script, in
// pieces of 3 bytes, then the end of the sequence.
func toolFake(t *testing.T, tmpl, script string) *fakeBackend {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "chat", tmpl+".jinja"))
	require.NoError(t, err)
	vars := map[string]string{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
	if tmpl == "qwen2.5" {
		vars = map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
	}
	f := newFake()
	f.tmpl, err = tokenizer.NewChatTemplate(string(src), vars)
	require.NoError(t, err)
	f.ctxLen, f.script, f.pieces = 8192, true, nil
	for i := 0; i < len(script); i += 3 {
		f.pieces = append(f.pieces, script[i:min(i+3, len(script))])
	}
	return f
}

const (
	weatherJSON = `{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}`
	timeJSON    = `{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}`
	twoTools    = `[` + weatherJSON + `, ` + timeJSON + `]`
	qwenCalls   = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
)

// toolRequest is a chat request of one user message with tools and
// extra fields (JSON, after a comma).
func toolRequest(stream bool, tools, extra string) string {
	return fmt.Sprintf(`{"max_tokens": 500, "stream": %v, "messages": [{"role": "user", "content": "Weather and time in Paris?"}], "tools": %s%s}`, stream, tools, extra)
}

// The official client's shapes (openai-python's ChatCompletion and
// ChatCompletionChunk) as far as tool calls go.
type (
	clientCall struct {
		Index    *int    `json:"index"`
		ID       *string `json:"id"`
		Type     *string `json:"type"`
		Function *struct {
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	}
	clientMessage struct {
		Role      *string      `json:"role"`
		Content   *string      `json:"content"`
		ToolCalls []clientCall `json:"tool_calls"`
	}
	clientCompletion struct {
		Object  string `json:"object"`
		Choices []struct {
			Message      clientMessage `json:"message"`
			Delta        clientMessage `json:"delta"`
			FinishReason *string       `json:"finish_reason"`
		} `json:"choices"`
	}
)

// gotCall is a call as a client has it once read or accumulated.
type gotCall struct{ ID, Name, Args string }

var callID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// whole reads a non-streamed answer: its content (nil: null), calls and
// finish_reason.
func whole(t *testing.T, body []byte) (*string, []gotCall, string) {
	t.Helper()
	var raw map[string]any
	require.NoError(t, json.Unmarshal(body, &raw), "%s", body)
	msg := raw["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	require.Contains(t, msg, "content", "content is there, null or not")
	var c clientCompletion
	require.NoError(t, json.Unmarshal(body, &c))
	require.Equal(t, "chat.completion", c.Object)
	m := c.Choices[0].Message
	require.Equal(t, "assistant", *m.Role)
	var calls []gotCall
	for _, tc := range m.ToolCalls {
		require.NotNil(t, tc.ID)
		assert.Regexp(t, callID, *tc.ID)
		assert.Equal(t, "function", *tc.Type)
		calls = append(calls, gotCall{*tc.ID, *tc.Function.Name, *tc.Function.Arguments})
	}
	return m.Content, calls, *c.Choices[0].FinishReason
}

// accumulate reads a stream as the official client's stream helper
// accumulates it, checking the shape of each call's deltas: the first
// carries index, id, type and name with arguments "", the later ones
// index and arguments only.
func accumulate(t *testing.T, body []byte) (string, []gotCall, string) {
	t.Helper()
	var content strings.Builder
	var calls []gotCall
	finish := ""
	events := sseEvents(t, body)
	for i, ev := range events {
		data, _ := json.Marshal(ev)
		var c clientCompletion
		require.NoError(t, json.Unmarshal(data, &c))
		require.Equal(t, "chat.completion.chunk", c.Object)
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if ch.FinishReason != nil {
			require.Equal(t, len(events)-1, i, "the finish comes last")
			finish = *ch.FinishReason
		}
		if ch.Delta.Content != nil {
			content.WriteString(*ch.Delta.Content)
		}
		for _, tc := range ch.Delta.ToolCalls {
			require.NotNil(t, tc.Index)
			require.NotNil(t, tc.Function)
			require.NotNil(t, tc.Function.Arguments, "arguments are always there")
			if tc.ID != nil {
				require.Equal(t, len(calls), *tc.Index, "a new call takes the next index")
				assert.Regexp(t, callID, *tc.ID)
				assert.Equal(t, "function", *tc.Type)
				require.NotNil(t, tc.Function.Name)
				assert.Empty(t, *tc.Function.Arguments, "a call's first delta has arguments \"\"")
				calls = append(calls, gotCall{ID: *tc.ID, Name: *tc.Function.Name})
				continue
			}
			require.Equal(t, len(calls)-1, *tc.Index, "arguments go to the call under way")
			assert.Nil(t, tc.Type)
			assert.Nil(t, tc.Function.Name)
			calls[*tc.Index].Args += *tc.Function.Arguments
		}
	}
	return content.String(), calls, finish
}

// answer reads the calls and finish_reason of an answer, streamed or not.
func answer(t *testing.T, stream bool, body []byte) ([]gotCall, string) {
	t.Helper()
	if stream {
		_, calls, finish := accumulate(t, body)
		return calls, finish
	}
	_, calls, finish := whole(t, body)
	return calls, finish
}

func names(calls []gotCall) []gotCall {
	out := make([]gotCall, len(calls))
	for i, c := range calls {
		out[i] = gotCall{Name: c.Name, Args: c.Args}
	}
	return out
}

func TestToolCallsHermes(t *testing.T) {
	fake := toolFake(t, "qwen2.5", qwenCalls)
	ts := startServer(t, fake, nil)
	want := []gotCall{{Name: "get_weather", Args: `{"city": "Paris"}`}, {Name: "get_time", Args: `{}`}}

	code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(false, twoTools, ""))
	require.Equal(t, http.StatusOK, code, "%s", body)
	content, calls, finish := whole(t, body)
	require.NotNil(t, content)
	assert.Equal(t, "Let me check.", *content)
	assert.Equal(t, want, names(calls))
	assert.NotEqual(t, calls[0].ID, calls[1].ID)
	assert.Equal(t, "tool_calls", finish)
	// The prompt is the model's template with the tools.
	text, err := fake.tmpl.Render([]tokenizer.Message{{Role: "user", Content: "Weather and time in Paris?"}}, tokenizer.ChatOptions{AddGenerationPrompt: true,
		Tools: []tokenizer.Tool{{Name: "get_weather", Description: "Get the weather in a city.", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`)},
			{Name: "get_time", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)}}})
	require.NoError(t, err)
	assert.Contains(t, text, "<tools>\n"+weatherJSON+"\n"+timeJSON+"\n</tools>")
	ids, _ := fake.Encode(text, false)
	assert.Equal(t, ids, fake.requests()[0].Prompt)

	code, _, body = ts.do(t, "POST", "/v1/chat/completions", toolRequest(true, twoTools, `, "stream_options": {"include_usage": false}`))
	require.Equal(t, http.StatusOK, code, "%s", body)
	scontent, scalls, finish := accumulate(t, body)
	assert.Equal(t, "Let me check.", scontent)
	assert.Equal(t, want, names(scalls))
	assert.Equal(t, "tool_calls", finish)
}

func TestToolCallsLlama3(t *testing.T) {
	fake := toolFake(t, "llama3.1", `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}`)
	ts := startServer(t, fake, nil)
	want := []gotCall{{Name: "get_weather", Args: `{"city": "Paris", "unit": "celsius"}`}}
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(false, `[`+weatherJSON+`]`, ""))
	require.Equal(t, http.StatusOK, code, "%s", body)
	content, calls, finish := whole(t, body)
	assert.Nil(t, content, "content null beside the call")
	assert.Equal(t, want, names(calls))
	assert.Equal(t, "tool_calls", finish)

	code, _, body = ts.do(t, "POST", "/v1/chat/completions", toolRequest(true, `[`+weatherJSON+`]`, ""))
	require.Equal(t, http.StatusOK, code, "%s", body)
	scontent, scalls, finish := accumulate(t, body)
	assert.Empty(t, scontent)
	assert.Equal(t, want, names(scalls))
	assert.Equal(t, "tool_calls", finish)

	// Several calls separated by ";".
	fake2 := toolFake(t, "llama3.1", `{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}`)
	ts2 := startServer(t, fake2, nil)
	code, _, body = ts2.do(t, "POST", "/v1/chat/completions", toolRequest(true, twoTools, ""))
	require.Equal(t, http.StatusOK, code, "%s", body)
	_, scalls, finish = accumulate(t, body)
	assert.Equal(t, []gotCall{{Name: "get_weather", Args: `{"city": "Paris"}`}, {Name: "get_time", Args: `{}`}}, names(scalls))
	assert.Equal(t, "tool_calls", finish)
	// parallel_tool_calls false: the first call only.
	code, _, body = ts2.do(t, "POST", "/v1/chat/completions", toolRequest(false, twoTools, `, "parallel_tool_calls": false`))
	require.Equal(t, http.StatusOK, code, "%s", body)
	_, calls, _ = whole(t, body)
	assert.Equal(t, []gotCall{{Name: "get_weather", Args: `{"city": "Paris"}`}}, names(calls))
	code, _, body = ts2.do(t, "POST", "/v1/chat/completions", toolRequest(true, twoTools, `, "parallel_tool_calls": false`))
	require.Equal(t, http.StatusOK, code, "%s", body)
	_, scalls, _ = accumulate(t, body)
	assert.Equal(t, []gotCall{{Name: "get_weather", Args: `{"city": "Paris"}`}}, names(scalls))
}

// Text that is no call streams as text, with tools or with tool_choice
// "none" (which renders the tools, as vLLM does, and reads no call).
func TestToolsPlainText(t *testing.T) {
	fake := toolFake(t, "qwen2.5", "It is sunny in Paris. ")
	ts := startServer(t, fake, nil)
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(false, twoTools, ""))
	require.Equal(t, http.StatusOK, code, "%s", body)
	content, calls, finish := whole(t, body)
	assert.Equal(t, "It is sunny in Paris. ", *content)
	assert.Empty(t, calls)
	assert.Equal(t, "stop", finish)
	assert.NotContains(t, string(body), "tool_calls")
	code, _, body = ts.do(t, "POST", "/v1/chat/completions", toolRequest(true, twoTools, ""))
	require.Equal(t, http.StatusOK, code, "%s", body)
	scontent, scalls, finish := accumulate(t, body)
	assert.Equal(t, "It is sunny in Paris. ", scontent)
	assert.Empty(t, scalls)
	assert.Equal(t, "stop", finish)
	assert.Greater(t, len(sseEvents(t, body)), 5, "text streams as it comes")

	none := toolFake(t, "qwen2.5", qwenCalls)
	tsn := startServer(t, none, nil)
	code, _, body = tsn.do(t, "POST", "/v1/chat/completions", toolRequest(false, twoTools, `, "tool_choice": "none"`))
	require.Equal(t, http.StatusOK, code, "%s", body)
	content, calls, finish = whole(t, body)
	assert.Equal(t, qwenCalls, *content, "tool_choice none: the output is text")
	assert.Empty(t, calls)
	assert.Equal(t, "stop", finish)
	text, err := none.tmpl.Render([]tokenizer.Message{{Role: "user", Content: "x"}}, tokenizer.ChatOptions{})
	require.NoError(t, err)
	assert.Greater(t, len(none.requests()[0].Prompt), len(strings.Fields(text))+20, "the tools are in the prompt")
}

// A conversation that goes on after the calls: the assistant's calls
// (content null) and the tools' results render through the template, as
// transformers renders them (tokenizer's tests hold the same text).
func TestToolResultsFedBack(t *testing.T) {
	fake := toolFake(t, "qwen2.5", "It is 22 C and 14:00 in Paris.")
	ts := startServer(t, fake, nil)
	req := `{"max_tokens": 100, "tools": ` + twoTools + `, "messages": [
		{"role": "user", "content": "Weather and time in Paris?"},
		{"role": "assistant", "content": "Let me check.", "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
			{"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "22 C"},
		{"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "14:00"}]}]}`
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", req)
	require.Equal(t, http.StatusOK, code, "%s", body)
	content, calls, finish := whole(t, body)
	assert.Equal(t, "It is 22 C and 14:00 in Paris.", *content)
	assert.Empty(t, calls)
	assert.Equal(t, "stop", finish)
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather in a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"The city\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather and time in Paris?<|im_end|>\n<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n22 C\n</tool_response>\n<tool_response>\n14:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	ids, _ := fake.Encode(want, false)
	assert.Equal(t, ids, fake.requests()[0].Prompt)

	// Llama 3.1: a result fed back without tools in the request still
	// renders through the template (its ipython turn).
	l3 := toolFake(t, "llama3.1", "22 C.")
	ts3 := startServer(t, l3, nil)
	code, _, body = ts3.do(t, "POST", "/v1/chat/completions", `{"max_tokens": 100, "messages": [
		{"role": "user", "content": "Weather?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22 C"}]}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	want = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"22 C\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	ids, _ = l3.Encode(want, false)
	assert.Equal(t, ids, l3.requests()[0].Prompt)
}

// tool_choice "required" and a named function: the prompt ends with the
// start of a call, the output reads strictly.
func TestForcedToolChoice(t *testing.T) {
	fake := toolFake(t, "qwen2.5", "get_time\", \"arguments\": {}}\n</tool_call>")
	ts := startServer(t, fake, nil)
	for _, stream := range []bool{false, true} {
		code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(stream, twoTools, `, "tool_choice": "required"`))
		require.Equal(t, http.StatusOK, code, "%s", body)
		calls, finish := answer(t, stream, body)
		assert.Equal(t, []gotCall{{Name: "get_time", Args: "{}"}}, names(calls))
		assert.Equal(t, "tool_calls", finish)
	}
	text, err := fake.tmpl.Render([]tokenizer.Message{{Role: "user", Content: "Weather and time in Paris?"}}, tokenizer.ChatOptions{AddGenerationPrompt: true,
		Tools: []tokenizer.Tool{{Name: "get_weather", Description: "Get the weather in a city.", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`)},
			{Name: "get_time", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)}}})
	require.NoError(t, err)
	ids, _ := fake.Encode(text+"<tool_call>\n{\"name\": \"", false)
	assert.Equal(t, ids, fake.requests()[0].Prompt, "the prompt ends inside a call")

	named := toolFake(t, "llama3.1", `{"city": "Oslo"}}; {"name": "get_weather", "parameters": {"city": "Rome"}}`)
	tsn := startServer(t, named, nil)
	for _, stream := range []bool{false, true} {
		code, _, body := tsn.do(t, "POST", "/v1/chat/completions", toolRequest(stream, twoTools, `, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}`))
		require.Equal(t, http.StatusOK, code, "%s", body)
		calls, finish := answer(t, stream, body)
		assert.Equal(t, []gotCall{{Name: "get_weather", Args: `{"city": "Oslo"}`}}, names(calls), "one call of the named function")
		assert.Equal(t, "tool_calls", finish)
	}
	prompt := named.requests()[0].Prompt
	tail, _ := named.Encode(`"get_weather", "parameters":`, false)
	assert.Equal(t, tail, prompt[len(prompt)-len(tail):], "the prompt names the function")
}

// An output that is not the call it must be is an error, whole or
// streamed: never a plain answer that looks like success. A stream that
// sent nothing yet (a forced call holds everything back) gets the error's
// status; one under way an error event and finish_reason "error".
func TestInvalidToolCall(t *testing.T) {
	for _, c := range []struct {
		name, tmpl, script, tools, extra, msg string
		underway                              bool
	}{
		{"required, no call", "qwen2.5", "I would rather not.", twoTools, `, "tool_choice": "required"`, "requires a call of one of its tools, and the model wrote none", false},
		{"named, another function", "llama3.1", `get_time", "parameters": {}}`, twoTools, `, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}`, "requires a call of get_weather", false},
		{"strict, bad arguments", "qwen2.5", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"kelvin\"}}\n</tool_call>", `[{"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius"]}}}}}]`, "", "the model's call 0 (get_weather) does not fit the tool: toolcall: the arguments do not satisfy the parameters schema: /unit: not one of the enum's values", true},
		{"forced, missing argument", "llama3.1", `{"unit": "celsius"}}`, twoTools, `, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}`, `/: the required property "city" is missing`, true},
		{"malformed", "qwen2.5", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"]}}\n</tool_call>", twoTools, "", "malformed tool call: toolcall: call 0 (get_weather) of the output is malformed: its arguments are not valid JSON", true},
	} {
		fake := toolFake(t, c.tmpl, c.script)
		ts := startServer(t, fake, nil)
		code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(false, c.tools, c.extra))
		require.Equal(t, http.StatusInternalServerError, code, "%s: %s", c.name, body)
		e := decodeError(t, body)
		assert.Equal(t, "invalid_tool_call", *e.Error.Code, c.name)
		assert.Contains(t, e.Error.Message, c.msg, c.name)

		code, _, body = ts.do(t, "POST", "/v1/chat/completions", toolRequest(true, c.tools, c.extra))
		if !c.underway {
			require.Equal(t, http.StatusInternalServerError, code, "%s: %s", c.name, body)
			assert.Contains(t, decodeError(t, body).Error.Message, c.msg, c.name)
			continue
		}
		require.Equal(t, http.StatusOK, code, "%s: %s", c.name, body)
		evs := sseEvents(t, body)
		var errEv map[string]any
		for _, ev := range evs {
			if e, ok := ev["error"]; ok {
				errEv = e.(map[string]any)
			}
		}
		require.NotNil(t, errEv, "%s: an error event: %s", c.name, body)
		assert.Contains(t, errEv["message"], c.msg, c.name)
		last := evs[len(evs)-1]["choices"].([]any)[0].(map[string]any)
		assert.Equal(t, "error", last["finish_reason"], c.name)
	}
}

func TestToolBadRequests(t *testing.T) {
	fake := toolFake(t, "qwen2.5", "x")
	ts := startServer(t, fake, nil)
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	for _, c := range []struct {
		name, body, param, msg string
	}{
		{"unknown named function", `{` + msgs + `, "tools": ` + twoTools + `, "tool_choice": {"type": "function", "function": {"name": "rm_rf"}}}`, "tool_choice", `names the function "rm_rf", which is not among the request's tools`},
		{"bad choice", `{` + msgs + `, "tools": ` + twoTools + `, "tool_choice": "always"}`, "tool_choice", `tool_choice "always": want "auto", "none", "required"`},
		{"choice object", `{` + msgs + `, "tools": ` + twoTools + `, "tool_choice": {"type": "tool"}}`, "tool_choice", "tool_choice: want"},
		{"required without tools", `{` + msgs + `, "tool_choice": "required"}`, "tool_choice", "without tools"},
		{"functions", `{` + msgs + `, "functions": [{"name": "f"}]}`, "functions", "deprecated spelling"},
		{"function_call", `{` + msgs + `, "function_call": "auto"}`, "function_call", "deprecated spelling"},
		{"message function_call", `{"messages": [{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}]}`, "messages[0].function_call", "send tool_calls"},
		{"not a list", `{` + msgs + `, "tools": {"type": "function"}}`, "tools", "want a list"},
		{"type", `{` + msgs + `, "tools": [{"type": "retrieval"}]}`, "tools[0].type", `"retrieval": want "function"`},
		{"no function", `{` + msgs + `, "tools": [{"type": "function"}]}`, "tools[0].function", "is missing"},
		{"name", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "get weather"}}]}`, "tools[0].function.name", "letters, digits"},
		{"twice", `{` + msgs + `, "tools": [` + timeJSON + `, ` + timeJSON + `]}`, "tools[1].function.name", "two tools of that name"},
		{"schema not object", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}`, "tools[0].function.parameters", "an array, not an object"},
		{"schema type", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}]}`, "tools[0].function.parameters", `/properties/a/type: strin is not a JSON Schema type`},
		{"schema required", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": "a"}}}]}`, "tools[0].function.parameters", "/required: want a list of property names"},
		{"schema root", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]}`, "tools[0].function.parameters", "a function's parameters are an object"},
		{"schema anyOf", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"anyOf": []}}}}}]}`, "tools[0].function.parameters", "/properties/a/anyOf: want a non-empty list of schemas"},
		{"calls from a user", `{"messages": [{"role": "user", "content": "hi", "tool_calls": []}]}`, "messages[0].tool_calls", "only an assistant's message calls tools"},
		{"arguments", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "want a JSON object's text"},
		{"call name", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}]}`, "messages[1].tool_calls[0].function.name", "is missing"},
		{"completions", `{"prompt": "hi", "tools": ` + twoTools + `}`, "tools", "the completions endpoint takes no tools"},
	} {
		path := "/v1/chat/completions"
		if c.name == "completions" {
			path = "/v1/completions"
		}
		code, _, body := ts.do(t, "POST", path, c.body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", c.name, body)
		e := decodeError(t, body)
		require.NotNil(t, e.Error.Param, c.name)
		assert.Equal(t, c.param, *e.Error.Param, c.name)
		assert.Contains(t, e.Error.Message, c.msg, c.name)
	}
	assert.Empty(t, fake.requests(), "nothing reached the engine")

	// Models whose templates take no tools, or write calls in a format
	// the worker does not read, say so.
	for tmpl, msg := range map[string]string{
		"llama2":     "this model's chat template does not take tools",
		"mistral-v3": "takes tools, but its models write calls in a format this worker does not read",
	} {
		ts := startServer(t, toolFake(t, tmpl, "x"), nil)
		code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(false, twoTools, ""))
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", tmpl, body)
		e := decodeError(t, body)
		assert.Equal(t, "tools", *e.Error.Param)
		assert.Contains(t, e.Error.Message, msg, tmpl)
	}
}

// TestToolsRealBackend serves mkmodel's tiny model on the CPU, first with
// its own template (which renders no tools: the request is refused), then
// with Llama 3.1's: the tools go through the real tokenizer's template
// and the model runs on the prompt.
func TestToolsRealBackend(t *testing.T) { testToolsRealBackend(t, "cpu") }

// TestGPUToolsRealBackend is the same on the GPU.
func TestGPUToolsRealBackend(t *testing.T) {
	n, err := hip.DeviceCount()
	if err == nil && n == 0 {
		err = candle.ErrDevice
	}
	testenv.Need(t, 2, "a GPU", err)
	testToolsRealBackend(t, "hip:0")
}

func testToolsRealBackend(t *testing.T, device string) {
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	serve := func() (*testServer, Backend) {
		b, err := openBackend(LoadOptions{Dir: dir, Device: device, DType: "auto", MaxBatch: 2, MaxQueue: 2})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		api := NewServer(ServerConfig{ModelID: "tiny"})
		api.SetReady(b)
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		return &testServer{Server: srv, api: api}, b
	}
	req := `{"temperature": 0, "max_tokens": 4, "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [` + weatherJSON + `]}`

	ts, _ := serve()
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", req)
	require.Equal(t, http.StatusBadRequest, code, "%s", body)
	assert.Contains(t, decodeError(t, body).Error.Message, "does not take tools")

	src, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "chat", "llama3.1.jinja"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chat_template.jinja"), src, 0o644))
	ts, b := serve()
	code, _, body = ts.do(t, "POST", "/v1/chat/completions", req)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var resp struct{ Usage usage }
	require.NoError(t, json.Unmarshal(body, &resp))
	tmpl, err := b.ChatTemplate()
	require.NoError(t, err)
	text, err := tmpl.Render([]tokenizer.Message{{Role: "user", Content: "Weather in Paris?"}}, tokenizer.ChatOptions{AddGenerationPrompt: true,
		Tools: []tokenizer.Tool{{Name: "get_weather", Description: "Get the weather in a city.", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`)}}})
	require.NoError(t, err)
	assert.Contains(t, text, "Given the following functions")
	ids, err := b.Encode(text, false)
	require.NoError(t, err)
	assert.Equal(t, len(ids), resp.Usage.PromptTokens, "the prompt is the template's, tools and all")
	assert.Equal(t, 4, resp.Usage.CompletionTokens)
}

// n choices each read their own calls, with their log-probabilities, whole
// and streamed (the chunks of each choice by its index).
func TestToolCallsChoices(t *testing.T) {
	ts := startServer(t, toolFake(t, "qwen2.5", qwenCalls), nil)
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", toolRequest(false, twoTools, `, "n": 2, "logprobs": true, "top_logprobs": 1`))
	require.Equal(t, http.StatusOK, code, "%s", body)
	var resp struct {
		Choices []struct {
			Index    int           `json:"index"`
			Message  clientMessage `json:"message"`
			Logprobs *struct {
				Content []json.RawMessage `json:"content"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &resp))
	require.Len(t, resp.Choices, 2)
	for i, c := range resp.Choices {
		assert.Equal(t, i, c.Index)
		assert.Equal(t, "tool_calls", c.FinishReason)
		require.Len(t, c.Message.ToolCalls, 2, "choice %d", i)
		assert.Equal(t, "get_weather", *c.Message.ToolCalls[0].Function.Name)
		assert.Equal(t, `{"city": "Paris"}`, *c.Message.ToolCalls[0].Function.Arguments)
		assert.Equal(t, "get_time", *c.Message.ToolCalls[1].Function.Name)
		require.NotNil(t, c.Logprobs, "choice %d", i)
		assert.NotEmpty(t, c.Logprobs.Content)
	}

	code, _, body = ts.do(t, "POST", "/v1/chat/completions", toolRequest(true, twoTools, `, "n": 2, "logprobs": true`))
	require.Equal(t, http.StatusOK, code, "%s", body)
	named := map[int][]string{}
	finish := map[int]string{}
	lps := map[int]int{}
	for _, ev := range sseEvents(t, body) {
		data, _ := json.Marshal(ev)
		var c struct {
			Choices []struct {
				Index    int           `json:"index"`
				Delta    clientMessage `json:"delta"`
				Logprobs *struct {
					Content []json.RawMessage `json:"content"`
				} `json:"logprobs"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(data, &c))
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Function != nil && tc.Function.Name != nil {
					named[ch.Index] = append(named[ch.Index], *tc.Function.Name)
				}
			}
			if ch.Logprobs != nil {
				lps[ch.Index] += len(ch.Logprobs.Content)
			}
			if ch.FinishReason != nil {
				finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	for i := range 2 {
		assert.Equal(t, []string{"get_weather", "get_time"}, named[i], "choice %d", i)
		assert.Equal(t, "tool_calls", finish[i], "choice %d", i)
		assert.Positive(t, lps[i], "choice %d: the log-probabilities of text held back come with the chunks that send it", i)
	}
}
