package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/tokenizer"
	"github.com/rocm-go/rocm/tokenizer/toolcall"
)

// Tool calling: OpenAI's tools and tool_choice rendered through the
// model's own chat template, and the calls read back out of the output
// (package toolcall) into tool_calls, whole or streamed as deltas.

// maxTools bounds a request's tools.
const maxTools = 128

// toolFields are the chat request's tool fields besides tools (which
// samplingParams holds, for the completions endpoint to refuse).
type toolFields struct {
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Functions         json.RawMessage `json:"functions"`
	FunctionCall      json.RawMessage `json:"function_call"`
}

// Tool choices.
const (
	choiceAuto     = "auto"
	choiceNone     = "none"
	choiceRequired = "required"
	choiceNamed    = "function" // a named function: toolSpec.name
)

// toolSpec is a request's checked tools: the functions, the choice, and
// the format the model writes its calls in.
type toolSpec struct {
	tools    []tokenizer.Tool
	choice   string
	name     string // choiceNamed's function
	parallel bool   // false: only the first call counts
	format   toolcall.Format
	strict   map[string]bool // the tools whose calls must satisfy their parameters schema
}

type toolIn struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// toolNameRE is OpenAI's rule for a function's name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// parseTools checks a chat request's tool fields against the model's chat
// template. It returns nil when the request has no tools.
func parseTools(b Backend, req *chatRequest) (*toolSpec, *worker.Error) {
	if !rawIsNull(req.Functions) || !rawIsNull(req.FunctionCall) {
		param := "functions"
		if rawIsNull(req.Functions) {
			param = "function_call"
		}
		return nil, worker.BadRequest(param, "%s: functions and function_call are OpenAI's deprecated spelling, which this worker does not take: send tools (each function as {\"type\": \"function\", \"function\": {...}}) and tool_choice", param)
	}
	var in []toolIn
	if !rawIsNull(req.Tools) {
		if err := json.Unmarshal(req.Tools, &in); err != nil {
			return nil, worker.BadRequest("tools", "tools: want a list of {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}")
		}
	}
	if len(in) > maxTools {
		return nil, worker.BadRequest("tools", "tools: %d tools, at most %d", len(in), maxTools)
	}
	ts := &toolSpec{choice: choiceAuto, parallel: req.ParallelToolCalls == nil || *req.ParallelToolCalls, strict: map[string]bool{}}
	seen := map[string]bool{}
	for i, t := range in {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, worker.BadRequest(param+".type", "%s.type %q: want \"function\"", param, t.Type)
		}
		if t.Function == nil {
			return nil, worker.BadRequest(param+".function", "%s.function is missing", param)
		}
		fn := t.Function
		if !toolNameRE.MatchString(fn.Name) {
			return nil, worker.BadRequest(param+".function.name", "%s.function.name %q: want 1 to 64 letters, digits, _ or -", param, fn.Name)
		}
		if seen[fn.Name] {
			return nil, worker.BadRequest(param+".function.name", "%s.function.name %q: two tools of that name", param, fn.Name)
		}
		seen[fn.Name] = true
		params := json.RawMessage(nil)
		if !rawIsNull(fn.Parameters) {
			if err := toolcall.CheckSchema(fn.Parameters); err != nil {
				return nil, worker.BadRequest(param+".function.parameters", "%s.function.parameters is not a valid JSON schema: %v", param, err)
			}
			params = fn.Parameters
		}
		ts.tools = append(ts.tools, tokenizer.Tool{Name: fn.Name, Description: fn.Description, Parameters: params})
		ts.strict[fn.Name] = fn.Strict != nil && *fn.Strict
	}
	if aerr := ts.parseChoice(req.ToolChoice); aerr != nil {
		return nil, aerr
	}
	if len(ts.tools) == 0 {
		return nil, nil
	}
	tmpl, err := b.ChatTemplate()
	if err != nil {
		return nil, worker.BadRequest("tools", "tools: this model has no chat template to render tools with: %v", err)
	}
	if !tmpl.TakesTools() {
		return nil, worker.BadRequest("tools", "tools: this model's chat template does not take tools (it renders none of them): the model was not trained to call functions")
	}
	f, ok := toolcall.Detect(tmpl.Source())
	if !ok {
		return nil, worker.BadRequest("tools", "tools: this model's chat template takes tools, but its models write calls in a format this worker does not read (it reads Llama 3's JSON and Hermes/Qwen's <tool_call> tags)")
	}
	ts.format = f
	return ts, nil
}

// parseChoice reads tool_choice: "auto" (the default), "none",
// "required", or {"type": "function", "function": {"name": ...}}.
func (ts *toolSpec) parseChoice(m json.RawMessage) *worker.Error {
	if rawIsNull(m) {
		return nil
	}
	var s string
	if err := json.Unmarshal(m, &s); err == nil {
		switch s {
		case choiceAuto, choiceNone:
		case choiceRequired:
			if len(ts.tools) == 0 {
				return worker.BadRequest("tool_choice", "tool_choice \"required\" without tools: give tools to call")
			}
		default:
			return worker.BadRequest("tool_choice", "tool_choice %q: want \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", s)
		}
		ts.choice = s
		return nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(m, &named); err != nil || named.Type != "function" {
		return worker.BadRequest("tool_choice", "tool_choice: want \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	for _, t := range ts.tools {
		if t.Name == named.Function.Name {
			// One call of it, as OpenAI answers a named choice.
			ts.choice, ts.name, ts.parallel = choiceNamed, t.Name, false
			return nil
		}
	}
	return worker.BadRequest("tool_choice", "tool_choice names the function %q, which is not among the request's tools", named.Function.Name)
}

// forced reports whether the request wants a call (required or named).
func (ts *toolSpec) forced() bool { return ts.choice == choiceRequired || ts.choice == choiceNamed }

// prefill is what the prompt ends with: the start of a call in the
// model's format when a call is forced, so that the model goes on inside
// one.
func (ts *toolSpec) prefill() string {
	if !ts.forced() {
		return ""
	}
	return ts.format.Prefill(ts.name)
}

// names are the functions the model may call.
func (ts *toolSpec) names() []string {
	if ts.choice == choiceNamed {
		return []string{ts.name}
	}
	names := make([]string, len(ts.tools))
	for i, t := range ts.tools {
		names[i] = t.Name
	}
	return names
}

// chatPrompt renders the conversation for the model to continue: with the
// request's tools through the model's chat template (tool_choice "none"
// too, as vLLM renders them, but then no call is read from the output),
// and the start of a call when one is forced.
func chatPrompt(b Backend, msgs []tokenizer.Message, ts *toolSpec) (string, *worker.Error) {
	if ts == nil {
		text, err := b.ApplyChatTemplate(msgs, true)
		if err != nil {
			return "", worker.BadRequest("messages", "the model's chat template rejects these messages: %v", err)
		}
		return text, nil
	}
	tmpl, err := b.ChatTemplate()
	if err == nil {
		var text string
		if text, err = tmpl.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, Tools: ts.tools}); err == nil {
			return text + ts.prefill(), nil
		}
	}
	return "", worker.BadRequest("messages", "the model's chat template rejects these messages and tools: %v", err)
}

// parseToolMessage reads the tool fields of message param into m: an
// assistant's tool_calls, a tool result's tool_call_id, a name.
func parseToolMessage(param string, in chatMessageIn, m *tokenizer.Message) *worker.Error {
	if !rawIsNull(in.FunctionCall) {
		return worker.BadRequest(param+".function_call", "%s.function_call is OpenAI's deprecated spelling, which this worker does not take: send tool_calls", param)
	}
	m.ToolCallID, m.Name = in.ToolCallID, in.Name
	if rawIsNull(in.ToolCalls) {
		return nil
	}
	if in.Role != "assistant" {
		return worker.BadRequest(param+".tool_calls", "%s.tool_calls: only an assistant's message calls tools", param)
	}
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(in.ToolCalls, &calls); err != nil {
		return worker.BadRequest(param+".tool_calls", "%s.tool_calls: want a list of {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", param)
	}
	for i, c := range calls {
		p := fmt.Sprintf("%s.tool_calls[%d]", param, i)
		if c.Type != "" && c.Type != "function" {
			return worker.BadRequest(p+".type", "%s.type %q: want \"function\"", p, c.Type)
		}
		if c.Function.Name == "" {
			return worker.BadRequest(p+".function.name", "%s.function.name is missing", p)
		}
		// Arguments are a JSON object's text; an object itself is taken too.
		args := string(c.Function.Arguments)
		var s string
		if json.Unmarshal(c.Function.Arguments, &s) == nil {
			args = s
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
			return worker.BadRequest(p+".function.arguments", "%s.function.arguments: want a JSON object's text", p)
		}
		m.ToolCalls = append(m.ToolCalls, tokenizer.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return nil
}

// toolCallDelta is a piece of a call in a stream chunk's delta: the
// first carries the id, type and name with arguments "", the later ones
// fragments of the arguments, as OpenAI streams them.
type toolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function toolFunctionDelta `json:"function"`
}

type toolFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// toolCallOut is a call in a whole message.
type toolCallOut struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function toolFunctionOut `json:"function"`
}

type toolFunctionOut struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolMessage is the whole assistant message of a request with tools:
// its content is null beside calls, as OpenAI sends it.
type toolMessage struct {
	Role      string        `json:"role"`
	Content   *string       `json:"content"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

// toolFormat makes the chat objects of a request whose output may hold
// tool calls: it reads each choice's output with a toolcall.Parser,
// streams text only where it is not (or cannot be) a call, and the calls
// as deltas.
type toolFormat struct {
	*chatFormat
	spec    *toolSpec
	stream  bool
	choices []*toolChoice
}

// toolChoice is what toolFormat reads of one choice.
type toolChoice struct {
	p     *toolcall.Parser
	held  string         // a forced call's content, sent only once the call is whole
	tail  toolcall.Delta // what the end of the output released, for the final chunk
	lps   []generate.TokenLogProb
	calls []tokenizer.ToolCall
	text  *string
}

// newToolFormat makes the formatter of a chat request of n choices with
// tools; with tool_choice "none" the output is text, as without tools.
func newToolFormat(cf *chatFormat, ts *toolSpec, stream bool, n int) formatter {
	if ts == nil || ts.choice == choiceNone {
		return cf
	}
	f := &toolFormat{chatFormat: cf, spec: ts, stream: stream, choices: make([]*toolChoice, n)}
	for i := range f.choices {
		c := &toolChoice{p: toolcall.NewParser(ts.format, ts.names())}
		c.p.Write(ts.prefill()) // the call the prompt began: nothing of it is sent yet
		f.choices[i] = c
	}
	return f
}

// keep drops what the request does not take: the calls after the first
// when parallel_tool_calls is false; a forced call's content until the
// end.
func (f *toolFormat) keep(c *toolChoice, d toolcall.Delta) toolcall.Delta {
	if f.spec.forced() {
		c.held += d.Content
		d.Content = ""
	}
	if !f.spec.parallel {
		kept := d.Calls[:0:0]
		for _, call := range d.Calls {
			if call.Index == 0 {
				kept = append(kept, call)
			}
		}
		d.Calls = kept
	}
	return d
}

// delta is d as a chunk's delta, nil when it adds nothing.
func deltaOut(d toolcall.Delta) *chatMessageOut {
	if d.Empty() {
		return nil
	}
	out := &chatMessageOut{}
	if d.Content != "" {
		out.Content = &d.Content
	}
	for _, c := range d.Calls {
		td := toolCallDelta{Index: c.Index, ID: c.ID, Function: toolFunctionDelta{Name: c.Name, Arguments: c.Arguments}}
		if c.Name != "" {
			td.Type = "function"
		}
		out.ToolCalls = append(out.ToolCalls, td)
	}
	return out
}

// chunk sends what the parser released; the log-probabilities of text
// held back wait for the chunk that sends it.
func (f *toolFormat) chunk(index int, text string, lps []generate.TokenLogProb) any {
	c := f.choices[index]
	c.lps = append(c.lps, lps...)
	out := deltaOut(f.keep(c, c.p.Write(text)))
	if out == nil {
		return nil // held back: it may be a call
	}
	lps, c.lps = c.lps, nil
	return f.obj("chat.completion.chunk", []chatChoice{{Index: index, Delta: out, Logprobs: f.lp.chat(lps)}}, nil)
}

func (f *toolFormat) final(index int, finish string) any {
	c := f.choices[index]
	out := deltaOut(c.tail)
	if out == nil || finish == finishError {
		out = &chatMessageOut{}
	}
	lps := c.lps
	c.lps = nil
	return f.obj("chat.completion.chunk", []chatChoice{{Index: index, Delta: out, Logprobs: f.lp.chat(lps), FinishReason: &finish}}, nil)
}

func (f *toolFormat) whole(out []choiceOut, u usage) any {
	choices := make([]chatChoice, len(out))
	for i, o := range out {
		c := f.choices[i]
		msg := toolMessage{Role: "assistant", Content: c.text}
		for _, call := range c.calls {
			msg.ToolCalls = append(msg.ToolCalls, toolCallOut{ID: call.ID, Type: "function", Function: toolFunctionOut{Name: call.Name, Arguments: call.Arguments}})
		}
		choices[i] = chatChoice{Index: i, Message: msg, Logprobs: f.lp.chat(o.lps), FinishReason: &o.finish}
	}
	return f.obj("chat.completion", choices, &u)
}

// finishError is the finish_reason of a stream whose output was not what
// the request asked (a malformed call, or none where one was required).
const finishError = "error"

// settle ends the output once the generation finished (text is the whole
// output when it was not streamed): the finish_reason to send
// ("tool_calls" where the model called functions), or the error to send
// instead when the output holds a malformed call, or no call where the
// request required one.
func (f *toolFormat) settle(index int, text, finish string) (string, *worker.Error) {
	c := f.choices[index]
	if !f.stream {
		f.keep(c, c.p.Write(text))
	}
	cut := finish == "length"
	tail, err := c.p.Close(cut)
	c.tail = f.keep(c, tail)
	if err != nil {
		return "", invalidToolCall("the model's output holds a malformed tool call: %v", err)
	}
	res := c.p.Result()
	c.calls = res.Calls
	if !f.spec.parallel && len(c.calls) > 1 {
		c.calls = c.calls[:1]
	}
	if f.spec.forced() && len(c.calls) == 0 && !cut {
		what := "a call of one of its tools"
		if f.spec.choice == choiceNamed {
			what = fmt.Sprintf("a call of %s", f.spec.name)
		}
		return "", invalidToolCall("the request's tool_choice requires %s, and the model wrote none", what)
	}
	if !cut {
		if aerr := f.spec.checkCalls(c.calls); aerr != nil {
			return "", aerr
		}
	}
	if f.spec.forced() {
		c.tail.Content = c.held + c.tail.Content
		if len(c.calls) == 0 { // cut before its call read as one: the prefill's text is no content
			c.tail.Content, res.Content = "", ""
		}
	}
	if res.Content != "" || len(c.calls) == 0 { // null only beside calls
		c.text = &res.Content
	}
	if len(c.calls) > 0 && !cut {
		return "tool_calls", nil
	}
	return finish, nil
}

// checkCalls checks the calls' arguments against their tools' parameters
// where the request asks for it: a strict tool, or a forced call.
func (ts *toolSpec) checkCalls(calls []tokenizer.ToolCall) *worker.Error {
	for i, c := range calls {
		if !ts.forced() && !ts.strict[c.Name] {
			continue
		}
		for _, t := range ts.tools {
			if t.Name != c.Name {
				continue
			}
			if err := toolcall.CheckArguments(c.Arguments, t.Parameters); err != nil {
				return invalidToolCall("the model's call %d (%s) does not fit the tool: %v", i, c.Name, err)
			}
		}
	}
	return nil
}

// invalidToolCall is the error of an output that is not the call it
// should be: the model's failing, which a retry (sampled anew) may mend.
func invalidToolCall(format string, args ...any) *worker.Error {
	return &worker.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: worker.Str("invalid_tool_call"), Message: fmt.Sprintf(format, args...)}
}
