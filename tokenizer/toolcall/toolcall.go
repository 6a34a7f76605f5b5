// Package toolcall reads the calls of functions that a chat model writes
// into its output, in the formats the model families' chat templates
// teach them: Llama 3.x's JSON ({"name": ..., "parameters": {...}},
// optionally after <|python_tag|>, several separated by ";") and
// Hermes/Qwen2.5's <tool_call> tags around {"name": ..., "arguments":
// {...}}.
//
// It sits beside package tokenizer because a tool-call format is a
// property of the chat template (tokenizer.ChatTemplate renders the tools
// and the calls of earlier turns; this package reads the new ones back),
// not of the model's weights or of the generation engine: any server
// built on tokenizer and candle/models/generate can call it on the text it
// decodes. Detect picks the format from the template's source; a Parser
// reads the text as it is generated and says what may be streamed, while
// text that may still turn out to be a call is held back; Parse reads a
// whole output. Prefill and Schema steer a model to a call when one is
// required; CheckArguments checks a call's arguments against its tool's
// parameters schema.
package toolcall

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Format is a way of writing tool calls.
type Format int

const (
	// Llama3JSON is Llama 3.1/3.2/3.3's: the whole output is one JSON
	// object {"name": ..., "parameters": {...}} (or "arguments"), optionally
	// after <|python_tag|>, or several separated by ";".
	Llama3JSON Format = iota + 1
	// Hermes is Hermes 2 Pro's and Qwen2.5's: each call is
	// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, with
	// text around the calls allowed.
	Hermes
)

// String names the format as vLLM's tool parsers do.
func (f Format) String() string {
	switch f {
	case Llama3JSON:
		return "llama3_json"
	case Hermes:
		return "hermes"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Detect picks the format a chat template teaches its model, from the
// template's source: Hermes where it writes <tool_call> tags, Llama3JSON
// where it asks for {"name": function name, "parameters": ...}. ok is
// false for a template whose format this package does not read.
func Detect(template string) (f Format, ok bool) {
	switch {
	case strings.Contains(template, "<tool_call>"):
		return Hermes, true
	case strings.Contains(template, `{"name": function name, "parameters"`):
		return Llama3JSON, true
	}
	return 0, false
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
)

// argsKeys are the keys a call's arguments go under: Llama 3 writes
// "parameters" as its template asks, and at times "arguments".
func (f Format) argsKeys() []string {
	if f == Llama3JSON {
		return []string{"parameters", "arguments"}
	}
	return []string{"arguments"}
}

// Prefill is the text that starts a call in the format, to end a prompt
// with when a call is required: the model goes on from inside the call.
// With a name it names the function too, up to where the arguments object
// begins. Feed it to the Parser before the generated text, so that the
// call reads whole.
func (f Format) Prefill(name string) string {
	var b strings.Builder
	if f == Hermes {
		b.WriteString(hermesOpen + "\n")
	}
	b.WriteString(`{"name": "`)
	if name != "" {
		b.WriteString(jsonEscape(name))
		b.WriteString(`", "` + f.argsKeys()[0] + `": `)
	}
	return b.String()
}

// NewCallID makes a call's id as OpenAI's look: "call_" and 24 random
// hexadecimal digits.
func NewCallID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "call_" + hex.EncodeToString(b[:])
}

// jsonEscape is s as it reads between a JSON string's quotes.
func jsonEscape(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}
