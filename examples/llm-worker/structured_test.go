package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocm-go/rocm/internal/testenv"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/mkmodel"
)

// compileSchema compiles a JSON schema for the reference validator.
func compileSchema(t *testing.T, s string) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("s.json", doc))
	v, err := c.Compile("s.json")
	require.NoError(t, err)
	return v
}

// TestResponseFormat asks a random tiny model on the CPU for JSON through
// the HTTP API: json_schema on chat (whole and streamed) and json_object
// on completions, with several seeds. The model draws junk, so the output
// is what the mask allows: every answer that ends "stop" parses and
// validates against its schema.
func TestResponseFormat(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("a tiny model's hundreds of steps on the CPU, arithmetic ten times slower under -race: it runs in full runs without -race (tier 1)")
	}
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	b, err := openBackend(LoadOptions{Dir: dir, Device: "cpu", DType: "auto", MaxBatch: 8, MaxQueue: 64})
	require.NoError(t, err)
	ts := startServer(t, nil, nil)
	ts.api.SetReady(b)
	t.Cleanup(func() { b.Close() })

	schema := `{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},"ok":{"type":"boolean"},` +
		`"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["name","n","ok","tags"],"additionalProperties":false}`
	check := func(v *jsonschema.Schema, text, finish, what string) bool {
		if finish != "stop" {
			assert.Equal(t, "length", finish, what)
			return false
		}
		require.True(t, json.Valid([]byte(text)), "%s: %q", what, text)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		require.NoError(t, err)
		require.NoError(t, v.Validate(inst), "%s: %q", what, text)
		return true
	}
	withSchema, anyObject := compileSchema(t, schema), compileSchema(t, `{"type":"object"}`)
	stops := 0
	for seed := 1; seed <= 4; seed++ {
		what := fmt.Sprintf("chat seed %d", seed)
		code, _, body := ts.do(t, "POST", "/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "JSON please"}],
			"max_tokens": 300, "seed": %d, "response_format": {"type": "json_schema", "json_schema": {"name": "thing", "strict": true, "schema": %s}}}`, seed, schema))
		require.Equal(t, 200, code, "%s: %s", what, body)
		var resp struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		require.NoError(t, json.Unmarshal(body, &resp))
		if check(withSchema, resp.Choices[0].Message.Content, resp.Choices[0].FinishReason, what) {
			stops++
		}

		what = fmt.Sprintf("completion seed %d", seed)
		code, _, body = ts.do(t, "POST", "/v1/completions", fmt.Sprintf(`{"prompt": "Say it in JSON:", "max_tokens": 300, "seed": %d,
			"response_format": {"type": "json_object"}}`, seed))
		require.Equal(t, 200, code, "%s: %s", what, body)
		var cresp completionResponse
		require.NoError(t, json.Unmarshal(body, &cresp))
		if check(anyObject, cresp.Choices[0].Text, *cresp.Choices[0].FinishReason, what) {
			stops++
		}
	}
	t.Logf("%d of 8 answers ended", stops)
	assert.GreaterOrEqual(t, stops, 5, "most answers end")

	// Streamed: the deltas join into the same kind of document.
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "stream": true, "max_tokens": 300, "seed": 3,
		"response_format": {"type": "json_schema", "json_schema": {"name": "thing", "schema": `+schema+`}}}`)
	require.Equal(t, 200, code, string(body))
	var text, finish string
	for _, ev := range sseEvents(t, body) {
		for _, c := range ev["choices"].([]any) {
			ch := c.(map[string]any)
			if d, ok := ch["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					text += s
				}
			}
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
		}
	}
	check(withSchema, text, finish, "stream")
}

// TestConstrainJSON: the function tool calling constrains a request
// with, as the worker's requests do (the fake records them).
func TestConstrainJSON(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	code, _, body := ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "response_format": {"type": "json_object"}}`)
	require.Equal(t, 200, code, string(body))
	fake.mu.Lock()
	req := fake.reqs[len(fake.reqs)-1]
	fake.mu.Unlock()
	require.NotNil(t, req.Constraint, "json_object constrains the request")
	words := make([]uint32, (fake.vocab+31)/32)
	n, err := req.Constraint.Mask(words)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "an object starts with {")
	assert.Equal(t, uint32(1), words['{'/32]>>('{'%32)&1)

	r := req
	r.Constraint = nil
	require.Nil(t, ts.api.ConstrainJSON(fake, &r, json.RawMessage(`{"type":"array","items":{"type":"integer"}}`), "tools[0].function.parameters"))
	n, err = r.Constraint.Mask(words)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, uint32(1), words['['/32]>>('['%32)&1)
	aerr := ts.api.ConstrainJSON(fake, &r, json.RawMessage(`{"type":"string","format":"date"}`), "tools[0].function.parameters")
	require.NotNil(t, aerr)
	assert.Equal(t, 400, aerr.Status)
	assert.Equal(t, "tools[0].function.parameters", *aerr.Param)
	assert.Contains(t, aerr.Message, "format")

	// n choices: a matcher each.
	code, _, body = ts.do(t, "POST", "/v1/completions", `{"prompt": "x", "n": 2, "response_format": {"type": "json_object"}}`)
	require.Equal(t, 200, code, string(body))
	fake.mu.Lock()
	two := fake.reqs[len(fake.reqs)-2:]
	fake.mu.Unlock()
	require.NotNil(t, two[0].Constraint)
	require.NotNil(t, two[1].Constraint)
	assert.NotSame(t, two[0].Constraint, two[1].Constraint, "each choice follows its own matcher")
}

// TestForcedToolCallConstrained: tool_choice "required" on a random tiny
// model with Llama 3.1's template gives a valid call every time, its
// arguments valid against the tool's parameters, because the decoding is
// constrained to one; a tool whose schema the grammar does not take is
// still served, unconstrained.
func TestForcedToolCallConstrained(t *testing.T) {
	if testenv.Race || testing.Short() {
		t.Skip("a tiny model's hundreds of steps on the CPU, arithmetic ten times slower under -race: it runs in full runs without -race (tier 1)")
	}
	dir := t.TempDir()
	require.NoError(t, mkmodel.Write(dir, mkmodel.Tiny(), nil))
	src, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "chat", "llama3.1.jinja"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chat_template.jinja"), src, 0o644))
	b, err := openBackend(LoadOptions{Dir: dir, Device: "cpu", DType: "auto", MaxBatch: 4, MaxQueue: 8})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ts := startServer(t, nil, nil)
	ts.api.SetReady(b)

	// No free string: a random model may write one forever, where every
	// other value is bounded (whitespace runs, digits), so each call ends.
	params := `{"type": "object", "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}, "hourly": {"type": "boolean"}}, "required": ["unit", "days", "hourly"], "additionalProperties": false}`
	schema := compileSchema(t, params)
	for seed := 1; seed <= 2; seed++ {
		code, _, body := ts.do(t, "POST", "/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 300, "seed": %d,
			"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": %s}}]}`, seed, params))
		require.Equal(t, 200, code, "seed %d: %s", seed, body)
		var resp struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		require.NoError(t, json.Unmarshal(body, &resp), string(body))
		require.Equal(t, "tool_calls", resp.Choices[0].FinishReason, "seed %d: %s", seed, body)
		require.Len(t, resp.Choices[0].Message.ToolCalls, 1)
		call := resp.Choices[0].Message.ToolCalls[0].Function
		assert.Equal(t, "get_weather", call.Name)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(call.Arguments))
		require.NoError(t, err, call.Arguments)
		require.NoError(t, schema.Validate(inst), "seed %d: %s", seed, call.Arguments)
	}
	// A pattern the grammar refuses: the request is still served.
	code, _, body := ts.do(t, "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 4,
		"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}}}]}`)
	assert.NotEqual(t, 400, code, string(body))
}
