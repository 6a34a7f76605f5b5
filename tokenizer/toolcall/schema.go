package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/tokenizer"
)

// Schema is the JSON schema that the JSON object of one valid call
// satisfies, in format f, for the given tools: {"name": <a tool's name>,
// <"parameters" for Llama3JSON, "arguments" for Hermes>: <that tool's
// parameters>}, name first, nothing else. With name set (a named
// tool_choice) only that tool's call is valid; else (tool_choice
// "required") any tool's, as an anyOf. A decoder constrained by it writes
// the object that follows the format's opener (Prefill("") ends just
// inside it): the whole output for Llama3JSON, the text between
// "<tool_call>\n" and "\n</tool_call>" for Hermes. A tool without
// parameters takes any object.
func Schema(f Format, tools []tokenizer.Tool, name string) (json.RawMessage, error) {
	if len(tools) == 0 {
		return nil, errors.New("toolcall: no tools to call")
	}
	argsKey, _ := json.Marshal(f.argsKeys()[0])
	var alts [][]byte
	for i, t := range tools {
		if name != "" && t.Name != name {
			continue
		}
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
			params = json.RawMessage(`{"type": "object"}`)
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(params, &probe); err != nil {
			return nil, fmt.Errorf("toolcall: the parameters of tools[%d] (%q) are not a JSON schema object: %v", i, t.Name, err)
		}
		nm, _ := json.Marshal(t.Name)
		var b bytes.Buffer
		b.WriteString(`{"type": "object", "properties": {"name": {"type": "string", "const": `)
		b.Write(nm)
		b.WriteString(`}, `)
		b.Write(argsKey)
		b.WriteString(`: `)
		if err := json.Compact(&b, params); err != nil {
			return nil, fmt.Errorf("toolcall: the parameters of tools[%d] (%q): %v", i, t.Name, err)
		}
		b.WriteString(`}, "required": ["name", `)
		b.Write(argsKey)
		b.WriteString(`], "additionalProperties": false}`)
		alts = append(alts, b.Bytes())
	}
	switch len(alts) {
	case 0:
		return nil, fmt.Errorf("toolcall: no tool is named %q", name)
	case 1:
		return alts[0], nil
	}
	return append(append([]byte(`{"anyOf": [`), bytes.Join(alts, []byte(", "))...), "]}"...), nil
}
