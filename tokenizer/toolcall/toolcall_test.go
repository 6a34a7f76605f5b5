package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/tokenizer"
)

// call is a call as the tests expect it (its ID is random).
type call struct{ Name, Args string }

// streamed feeds text to a parser in pieces of n bytes (0: whole) and
// checks that what the deltas stream adds up to the parser's result: the
// content, and each call's name in its first delta and its arguments in
// the later ones.
func streamed(t *testing.T, f Format, text string, n int, names []string, cut bool) (Result, error) {
	t.Helper()
	p := NewParser(f, names)
	var content strings.Builder
	var got []call
	var ids []string
	add := func(d Delta) {
		content.WriteString(d.Content)
		for _, c := range d.Calls {
			if c.Name != "" {
				require.Equal(t, len(got), c.Index, "a call's first delta comes in order")
				require.Empty(t, c.Arguments, "a call's first delta carries no arguments")
				assert.Regexp(t, regexp.MustCompile(`^call_[0-9a-f]{24}$`), c.ID)
				got = append(got, call{Name: c.Name})
				ids = append(ids, c.ID)
				continue
			}
			require.Equal(t, len(got)-1, c.Index, "arguments go to the call under way")
			got[c.Index].Args += c.Arguments
		}
	}
	if n == 0 {
		add(p.Write(text))
	}
	for i := 0; n > 0 && i < len(text); i += n {
		add(p.Write(text[i:min(i+n, len(text))]))
	}
	d, err := p.Close(cut)
	add(d)
	res := p.Result()
	if err != nil {
		return res, err
	}
	assert.Equal(t, res.Content, content.String(), "streamed content")
	require.Len(t, got, len(res.Calls))
	for i, c := range res.Calls {
		assert.Equal(t, call{c.Name, c.Arguments}, got[i], "streamed call %d", i)
		assert.Equal(t, ids[i], c.ID)
	}
	return res, nil
}

// check parses text whole and in pieces of every size up to 7 bytes, and
// wants the same content and calls each time.
func check(t *testing.T, f Format, text string, names []string, content string, calls ...call) {
	t.Helper()
	for _, n := range []int{0, 1, 2, 3, 5, 7} {
		res, err := streamed(t, f, text, n, names, false)
		require.NoError(t, err, "pieces of %d", n)
		assert.Equal(t, content, res.Content, "pieces of %d", n)
		got := make([]call, len(res.Calls))
		for i, c := range res.Calls {
			got[i] = call{c.Name, c.Arguments}
		}
		if len(calls) == 0 {
			assert.Empty(t, got, "pieces of %d", n)
		} else {
			assert.Equal(t, calls, got, "pieces of %d", n)
		}
	}
}

func TestHermes(t *testing.T) {
	check(t, Hermes, "Hello there. ", nil, "Hello there. ")
	check(t, Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>", nil, "",
		call{"get_weather", `{"city": "Paris", "days": [1, 2]}`})
	// Text before, two calls, and a brace inside a string.
	check(t, Hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris \\\"x\\\"\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n", nil,
		"Let me check.", call{"get_weather", `{"city": "Pa}ris \"x\""}`}, call{"get_time", `{}`})
	// Arguments before the name, no arguments, extra keys, no closing tag.
	check(t, Hermes, "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\", \"id\": 7, \"ok\": true}", nil, "",
		call{"f", `{"x": 1}`}, call{"g", `{}`})
	// Not calls: stays text, tags and all.
	check(t, Hermes, "a <tool_call>\nnot json</tool_call> b", nil, "a <tool_call>\nnot json</tool_call> b")
	check(t, Hermes, "<tool_call>{\"name\": 5}</tool_call>", nil, "<tool_call>{\"name\": 5}</tool_call>")
	check(t, Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}", nil, "<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}")
	check(t, Hermes, "x <tool_ca", nil, "x <tool_ca")
	// A function not among names is text; the next call still counts.
	check(t, Hermes, "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call> <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", []string{"f"},
		"<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>", call{"f", `{}`})
}

func TestLlama3(t *testing.T) {
	check(t, Llama3JSON, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, nil, "", call{"get_weather", `{"city": "Paris"}`})
	check(t, Llama3JSON, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": [1, {\"y\": null}]}}", nil, "",
		call{"a", `{}`}, call{"b", `{"x": [1, {"y": null}]}`})
	check(t, Llama3JSON, " \n{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"n\": -1.5e3}, \"k\": false}", nil, "", call{"f", `{"n": -1.5e3}`})
	// Text, and JSON that is not a call, stay as they are.
	check(t, Llama3JSON, "  The answer is {x}. ", nil, "  The answer is {x}. ")
	check(t, Llama3JSON, ` {"result": 42}`, nil, ` {"result": 42}`)
	check(t, Llama3JSON, `{"name": "f", "parameters": {}} and more`, nil, "and more", call{"f", `{}`})
	check(t, Llama3JSON, `<|python_tag|>hello`, nil, `<|python_tag|>hello`)
}

func TestMalformedCall(t *testing.T) {
	for _, c := range []struct {
		f    Format
		text string
		why  string
	}{
		{Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1]}}</tool_call>", "its arguments are not valid JSON"},
		{Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}", "the output ended inside it"},
		{Llama3JSON, `{"name": "f", "parameters": {"a": 1} "b"}`, `'"' after a value`},
		{Llama3JSON, `{"name": "f", "parameters": {"a": 1}`, "the output ended inside it"},
	} {
		for _, n := range []int{0, 1, 4} {
			_, err := streamed(t, c.f, c.text, n, nil, false)
			require.Error(t, err, c.text)
			assert.ErrorContains(t, err, "call 0 (f) of the output is malformed: "+c.why)
		}
		_, err := Parse(c.f, c.text, nil)
		assert.Error(t, err)
	}
	// A cut output keeps the call it left unfinished, as far as it got.
	res, err := streamed(t, Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, ", 3, nil, true)
	require.NoError(t, err)
	require.Len(t, res.Calls, 1)
	assert.Equal(t, `{"a": [1, `, res.Calls[0].Arguments)
	// Once failed, the parser reads nothing more.
	p := NewParser(Llama3JSON, nil)
	p.Write(`{"name": "f", "parameters": {} x`)
	assert.True(t, p.Write(`{"name": "g", "parameters": {}}`).Empty())
}

func TestParse(t *testing.T) {
	res, err := Parse(Hermes, "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"é<>&\"}}\n</tool_call>", []string{"f", "g"})
	require.NoError(t, err)
	assert.Equal(t, "Sure.", res.Content)
	require.Len(t, res.Calls, 1)
	assert.Equal(t, "f", res.Calls[0].Name)
	assert.Equal(t, `{"q": "é<>&"}`, res.Calls[0].Arguments)
	assert.True(t, strings.HasPrefix(res.Calls[0].ID, "call_"))
	assert.NotEqual(t, NewCallID(), NewCallID())
}

func TestDetectAndPrefill(t *testing.T) {
	for name, want := range map[string]Format{"llama3.1": Llama3JSON, "qwen2.5": Hermes} {
		src := readTemplate(t, name)
		f, ok := Detect(src)
		assert.True(t, ok, name)
		assert.Equal(t, want, f, name)
	}
	_, ok := Detect(readTemplate(t, "mistral-v3"))
	assert.False(t, ok, "Mistral's [TOOL_CALLS] is not a format of this package")
	assert.Equal(t, "llama3_json", Llama3JSON.String())
	assert.Equal(t, "hermes", Hermes.String())
	assert.Equal(t, "Format(9)", Format(9).String())

	assert.Equal(t, `{"name": "`, Llama3JSON.Prefill(""))
	assert.Equal(t, `{"name": "get_weather", "parameters": `, Llama3JSON.Prefill("get_weather"))
	assert.Equal(t, "<tool_call>\n{\"name\": \"a\\\"<b\", \"arguments\": ", Hermes.Prefill(`a"<b`))
	// A prefilled output reads whole once the prefill goes first.
	for _, f := range []Format{Llama3JSON, Hermes} {
		res, err := Parse(f, f.Prefill("get_weather")+`{"city": "Oslo"}}`, []string{"get_weather"})
		require.NoError(t, err, f)
		require.Len(t, res.Calls, 1, f)
		assert.Equal(t, `{"city": "Oslo"}`, res.Calls[0].Arguments)
		res, err = Parse(f, f.Prefill("")+`get_weather", "`+f.argsKeys()[0]+`": {}}`, nil)
		require.NoError(t, err, f)
		require.Len(t, res.Calls, 1, f)
		assert.Equal(t, "get_weather", res.Calls[0].Name)
	}
}

func TestSchema(t *testing.T) {
	tools := []tokenizer.Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`)},
		{Name: "get_time"},
	}
	s, err := Schema(Hermes, tools, "get_weather")
	require.NoError(t, err)
	assert.JSONEq(t, `{"type": "object", "properties": {"name": {"type": "string", "const": "get_weather"},
		"arguments": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
		"required": ["name", "arguments"], "additionalProperties": false}`, string(s))
	// name comes first, as the formats write it
	assert.Less(t, strings.Index(string(s), `"name"`), strings.Index(string(s), `"arguments"`))

	s, err = Schema(Llama3JSON, tools, "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"anyOf": [
		{"type": "object", "properties": {"name": {"type": "string", "const": "get_weather"},
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
			"required": ["name", "parameters"], "additionalProperties": false},
		{"type": "object", "properties": {"name": {"type": "string", "const": "get_time"}, "parameters": {"type": "object"}},
			"required": ["name", "parameters"], "additionalProperties": false}]}`, string(s))

	_, err = Schema(Hermes, tools, "nope")
	assert.ErrorContains(t, err, `no tool is named "nope"`)
	_, err = Schema(Hermes, nil, "")
	assert.ErrorContains(t, err, "no tools")
	_, err = Schema(Hermes, []tokenizer.Tool{{Name: "f", Parameters: json.RawMessage(`[1]`)}}, "")
	assert.ErrorContains(t, err, `the parameters of tools[0] ("f") are not a JSON schema object`)
}

// Random outputs, well-formed ones with random bytes cut out and random
// pieces of the formats put in, read whole and in random pieces: never a
// panic, the same result either way, the deltas adding up to it, and
// every case (text, calls, malformed calls) met many times.
func TestRandomOutputs(t *testing.T) {
	atoms := []string{"<tool_call>", "</tool_call>", "<|python_tag|>", "{", "}", "[", "]", `"name"`, `"arguments"`, `"parameters"`,
		`"f"`, `"g"`, ": ", ", ", ";", " ", "\n", "1", "true", `"x\"}"`, `\`, "text", "<tool_", "é"}
	wellFormed := map[Format][]string{
		Hermes:     {"Sure. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, \"}\"], \"b\": {\"c\": null}}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"},
		Llama3JSON: {"<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": [1, \"}\"], \"b\": {\"c\": null}}}; {\"name\": \"g\", \"parameters\": {}}"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	stats := map[string]int{}
	for range 2000 {
		for _, f := range []Format{Hermes, Llama3JSON} {
			text := wellFormed[f][0]
			for range rng.IntN(3) {
				at := rng.IntN(len(text) + 1)
				if rng.IntN(2) == 0 && at < len(text) {
					text = text[:at] + text[at+1+rng.IntN(min(3, len(text)-at)):]
				} else {
					text = text[:at] + atoms[rng.IntN(len(atoms))] + text[at:]
				}
			}
			want, werr := Parse(f, text, nil)
			got, err := streamed(t, f, text, 1+rng.IntN(6), nil, false)
			require.Equal(t, werr != nil, err != nil, "%s %q: %v / %v", f, text, werr, err)
			switch {
			case werr != nil:
				stats["malformed"]++
				continue
			case len(want.Calls) > 0:
				stats["calls"]++
			default:
				stats["text"]++
			}
			assert.Equal(t, want.Content, got.Content, "%s %q", f, text)
			require.Len(t, got.Calls, len(want.Calls), "%s %q", f, text)
			for j := range want.Calls {
				assert.Equal(t, want.Calls[j].Name, got.Calls[j].Name)
				assert.Equal(t, want.Calls[j].Arguments, got.Calls[j].Arguments)
				assert.True(t, json.Valid([]byte(got.Calls[j].Arguments)), "%q", got.Calls[j].Arguments)
			}
		}
	}
	for _, k := range []string{"malformed", "calls", "text"} {
		assert.Greater(t, stats[k], 100, "%s: %v", k, stats)
	}
}
