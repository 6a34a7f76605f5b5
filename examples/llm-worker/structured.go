package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/tokenizer/toolcall"
)

// Structured output: response_format's json_object and json_schema, by
// constrained decoding (package grammar). A schema is compiled once and
// kept (grammars), so that the requests that send it share its cache of
// token masks.

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema"`
}

// jsonSchema is response_format's json_schema.
type jsonSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// maxGrammars bounds the compiled schemas a server keeps.
const maxGrammars = 64

// grammars holds compiled schemas by their compact text, and the
// json_object grammar.
type grammars struct {
	mu     sync.Mutex
	byText map[string]*grammar.Grammar
	object *grammar.Grammar
}

// get compiles a schema, or returns the grammar compiled before for the
// same text; a nil schema is json_object's grammar.
func (gs *grammars) get(schema []byte) (*grammar.Grammar, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if schema == nil {
		if gs.object == nil {
			gs.object = grammar.JSONObject()
		}
		return gs.object, nil
	}
	var key bytes.Buffer
	if err := json.Compact(&key, schema); err != nil {
		return nil, errs.Package("grammar").Errorf("CompileSchema", errs.ErrArgument, "the schema is not valid JSON: %v", err)
	}
	if g, ok := gs.byText[key.String()]; ok {
		return g, nil
	}
	g, err := grammar.CompileSchema(key.Bytes())
	if err != nil {
		return nil, err
	}
	if gs.byText == nil || len(gs.byText) >= maxGrammars {
		gs.byText = map[string]*grammar.Grammar{}
	}
	gs.byText[key.String()] = g
	return g, nil
}

// ConstrainJSON restricts r to JSON: to the JSON schema schema, or to any
// JSON object when schema is nil (response_format's json_object). The
// request's stop tokens must be set already: the constraint allows them
// only once the JSON is complete, and the request finishes "stop" at the
// JSON's last token. A schema the grammar cannot take is a 400 naming
// param (the request field that carried it) and the keyword at fault.
// Tool calling uses it for tool_choice "required" with the tools'
// argument schemas.
func (s *Server) ConstrainJSON(b Backend, r *generate.Request, schema json.RawMessage, param string) *worker.Error {
	if schema != nil && rawIsNull(schema) {
		return worker.BadRequest(param, "%s: the schema is missing", param)
	}
	g, err := s.grammars.get(schema)
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			where := ""
			if e.Field != "" && e.Field != "#" {
				where = " at " + e.Field
			}
			return worker.BadRequest(param, "%s%s: %s", param, where, e.Detail)
		}
		return worker.BadRequest(param, "%s: %v", param, err)
	}
	c, err := b.Constrain(g, r.StopTokens)
	if err != nil {
		return worker.BadRequest(param, "%s: %v", param, err)
	}
	r.Constraint = c
	return nil
}

// constrainToolCall constrains a request whose tool_choice forces a call
// ("required" or a named function) to one valid call: the JSON object of
// toolcall.Schema, the prompt's prefill (the call's start) already read.
// Tools whose parameters use keywords the grammar does not take are left
// unconstrained: their calls are still checked once whole, as before.
func (s *Server) constrainToolCall(b Backend, r *generate.Request, ts *toolSpec) *worker.Error {
	if ts == nil || !ts.forced() {
		return nil
	}
	r.Constraint = nil // the output is a call, whatever response_format asked
	schema, err := toolcall.Schema(ts.format, ts.tools, ts.name)
	if err != nil {
		return nil // parseTools has checked the tools: nothing to constrain by
	}
	g, err := s.grammars.get(schema)
	if err != nil {
		return nil
	}
	c, err := b.Constrain(g, r.StopTokens)
	if err != nil {
		return worker.BadRequest("tools", "tools: %v", err)
	}
	// The prefill's JSON (after Hermes' tag) is the call's start.
	prefill := ts.prefill()
	if i := strings.IndexByte(prefill, '{'); i >= 0 {
		prefill = prefill[i:]
	}
	if m, ok := c.(*grammar.Matcher); ok {
		if err := m.AcceptString(prefill); err != nil {
			return nil // not the start of the schema's object: left unconstrained
		}
		r.Constraint = m
	}
	return nil
}

// applyResponseFormat constrains a request by its response_format.
func (s *Server) applyResponseFormat(b Backend, p *samplingParams, r *generate.Request) *worker.Error {
	f := p.ResponseFormat
	if f == nil {
		return nil
	}
	switch f.Type {
	case "", "text":
		return nil
	case "json_object":
		return s.ConstrainJSON(b, r, nil, "response_format")
	case "json_schema":
		if f.JSONSchema == nil {
			return worker.BadRequest("response_format", "response_format json_schema: json_schema is missing (want {name, schema, strict})")
		}
		if f.JSONSchema.Schema == nil || rawIsNull(f.JSONSchema.Schema) {
			return worker.BadRequest("response_format", "response_format json_schema: json_schema.schema is missing")
		}
		return s.ConstrainJSON(b, r, f.JSONSchema.Schema, "response_format")
	}
	return worker.BadRequest("response_format", "response_format %q: want text, json_object or json_schema", f.Type)
}
