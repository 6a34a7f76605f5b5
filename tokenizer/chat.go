package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rocm-go/rocm/errs"
)

// Message is one turn of a chat: Role is "system", "user", "assistant" or
// "tool" (or whatever else the model's template knows), Content its text.
//
// An assistant turn that called functions holds its calls in ToolCalls
// (its Content is often empty); a "tool" turn holds a function's result
// in Content, the call it answers in ToolCallID and the function's name
// in Name. Templates see these fields only where they are set, as
// transformers passes a message dict as the client wrote it: Llama 3.1's
// template tests "'tool_calls' in message".
type Message struct {
	Role, Content string
	ToolCalls     []ToolCall
	ToolCallID    string
	Name          string
}

// ToolCall is one call of a function that an assistant turn made.
// Arguments is a JSON object's text, as OpenAI's API carries it; a
// template sees it decoded (a mapping), as vLLM and transformers pass it.
type ToolCall struct {
	ID, Name, Arguments string
}

// Tool is a function the model may call: its name, what it does, and a
// JSON schema of its arguments object (nil: no parameters).
type Tool struct {
	Name, Description string
	Parameters        json.RawMessage
}

// ChatOptions are what a chat is rendered with besides its messages.
type ChatOptions struct {
	// AddGenerationPrompt ends the text with the assistant's header.
	AddGenerationPrompt bool
	// Tools are the functions the model may call: the template sees them
	// as transformers passes them, a list of {"type": "function",
	// "function": {"name", "description", "parameters"}} (a field left
	// out where it is empty). None: tools is None.
	Tools []Tool
}

// ChatTemplate is a parsed Jinja2 chat template, with the special tokens'
// texts it sees (bos_token, eos_token, ...). It is safe for concurrent
// use.
type ChatTemplate struct {
	nodes []jnode
	path  string
	src   string
	vars  map[string]string

	toolsOnce  sync.Once
	takesTools bool
}

// NewChatTemplate parses a chat template's source. specials are the
// variables the template sees besides the messages: the special tokens'
// texts ("bos_token": "<|begin_of_text|>", ...), as tokenizer_config.json
// names them. A construct this package cannot run is an ErrTemplate error
// naming it and its line.
func NewChatTemplate(src string, specials map[string]string) (*ChatTemplate, error) {
	nodes, err := parseTemplate(src)
	if err != nil {
		return nil, &Error{Pkg: string(pkg), Op: "NewChatTemplate", Kind: ErrTemplate, Detail: "cannot parse the chat template", Err: err}
	}
	return &ChatTemplate{nodes: nodes, src: src, vars: maps.Clone(specials)}, nil
}

// Source is the template's Jinja source.
func (c *ChatTemplate) Source() string { return c.src }

type jsonTokenizerConfig struct {
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	UNK          json.RawMessage `json:"unk_token"`
	PAD          json.RawMessage `json:"pad_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

type jsonGenerationConfig struct {
	EOS json.RawMessage `json:"eos_token_id"`
}

// LoadDir reads a model directory as Hugging Face publishes it:
// tokenizer.json, and if present tokenizer_config.json (bos_token,
// eos_token, chat_template), chat_template.jinja (a chat template that
// takes precedence, as in transformers) and generation_config.json
// (eos_token_id, a number or a list: Llama 3.1 Instruct ends a turn with
// any of three tokens).
//
// A chat template that this package cannot parse does not fail LoadDir:
// ApplyChatTemplate returns the error, naming the construct and its line.
//
// A folder without tokenizer.json but with vocab.json and merges.txt is a
// CLIP text tokenizer (diffusers' tokenizer/ and tokenizer_2/ folders),
// made as transformers converts it (see loadCLIP).
func LoadDir(dir string) (*Tokenizer, error) {
	const op = "LoadDir"
	path := filepath.Join(dir, "tokenizer.json")
	var t *Tokenizer
	var err error
	if isCLIPDir(dir) {
		t, err = loadCLIP(op, dir)
	} else {
		t, err = load(op, path)
	}
	if err != nil {
		return nil, err
	}
	t.chatVar = map[string]string{}

	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	var cfg jsonTokenizerConfig
	if ok, err := readJSON(op, cfgPath, &cfg); err != nil {
		return nil, err
	} else if ok {
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"bos_token", cfg.BOS}, {"eos_token", cfg.EOS}, {"unk_token", cfg.UNK}, {"pad_token", cfg.PAD}} {
			s, set, err := tokenString(f.raw)
			if err != nil {
				return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: cfgPath, Field: f.name, Detail: "neither a string, null nor an object with a content string"}
			}
			if !set {
				continue
			}
			var id int32
			if s != "" {
				var ok bool
				if id, ok = t.TokenID(s); !ok {
					return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: cfgPath, Field: f.name, Detail: fmt.Sprintf("%q is not a token of %s", s, path)}
				}
				t.chatVar[f.name] = s
			}
			switch f.name {
			case "bos_token":
				t.bos, t.hasBOS = id, s != ""
			case "eos_token":
				if s != "" {
					t.eos = appendNew(t.eos, id)
				}
			case "pad_token":
				t.pad, t.hasPad = id, s != ""
			}
		}
		if !isNull(cfg.ChatTemplate) {
			src, err := chooseTemplate(cfg.ChatTemplate)
			if err != nil {
				return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: cfgPath, Field: "chat_template", Detail: err.Error()}
			}
			t.setChatTemplate(src, cfgPath)
		}
	}

	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	if src, err := os.ReadFile(jinjaPath); err == nil {
		t.setChatTemplate(string(src), jinjaPath)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrIO, Path: jinjaPath, Err: err}
	}

	genPath := filepath.Join(dir, "generation_config.json")
	var gen jsonGenerationConfig
	if ok, err := readJSON(op, genPath, &gen); err != nil {
		return nil, err
	} else if ok && !isNull(gen.EOS) {
		var ids []int32
		var one int32
		if err := json.Unmarshal(gen.EOS, &one); err == nil {
			ids = []int32{one}
		} else if err := json.Unmarshal(gen.EOS, &ids); err != nil {
			return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: genPath, Field: "eos_token_id", Detail: "neither a token id nor a list of them"}
		}
		for _, id := range ids {
			if id < 0 || int(id) >= t.vocabSize {
				return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: genPath, Field: "eos_token_id", Detail: fmt.Sprintf("%d is not a token id (the vocabulary has %d)", id, t.vocabSize)}
			}
			t.eos = appendNew(t.eos, id)
		}
	}
	return t, nil
}

func appendNew(ids []int32, id int32) []int32 {
	for _, x := range ids {
		if x == id {
			return ids
		}
	}
	return append(ids, id)
}

// readJSON decodes the JSON file at path into v; a missing file is not an
// error (ok false).
func readJSON(op, path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrIO, Path: path, Err: err}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: path, Detail: "not valid JSON of the expected shape", Err: err}
	}
	return true, nil
}

// tokenString reads a special token of tokenizer_config.json: a string,
// null (set, but empty), or an AddedToken object {"content": ...}.
func tokenString(raw json.RawMessage) (s string, set bool, err error) {
	if len(raw) == 0 {
		return "", false, nil
	}
	if isNull(raw) {
		return "", true, nil
	}
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, errors.New("bad token")
	}
	return *obj.Content, true, nil
}

// chooseTemplate reads chat_template: a string, or a list of {name,
// template} of which transformers uses "default".
func chooseTemplate(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", errors.New("neither a string nor a list of {name, template}")
	}
	for _, x := range list {
		if x.Name == "default" {
			return x.Template, nil
		}
	}
	return "", errors.New("a list of templates without one named \"default\"")
}

func (t *Tokenizer) setChatTemplate(src, path string) {
	nodes, err := parseTemplate(src)
	if err != nil {
		t.chat = nil
		t.chatErr = &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrTemplate, Path: path, Detail: "cannot parse the chat template", Err: err}
		return
	}
	// The template shares the tokenizer's variables: a loader may set
	// them after the template.
	t.chat, t.chatErr = &ChatTemplate{nodes: nodes, path: path, src: src, vars: t.chatVar}, nil
}

// ChatTemplate is the model's chat template, or the reason it has none
// (ErrNoChatTemplate) or cannot use it (ErrTemplate).
func (t *Tokenizer) ChatTemplate() (*ChatTemplate, error) {
	if t.chat == nil {
		return nil, t.chatErr
	}
	return t.chat, nil
}

// ApplyChatTemplate renders msgs with the model's chat template, as
// transformers' apply_chat_template(msgs, tokenize=False,
// add_generation_prompt=addGenerationPrompt) does; ChatTemplate.Render
// takes tools too.
//
// The result usually starts with the BOS text ("<s>",
// "<|begin_of_text|>"): encode it with addSpecial false. A template that
// raises an exception (roles that do not alternate, say) is an ErrTemplate
// error with the template's message.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.chat == nil {
		return "", t.chatErr
	}
	return t.chat.Render(msgs, ChatOptions{AddGenerationPrompt: addGenerationPrompt})
}

// Render renders msgs as transformers' apply_chat_template(msgs,
// tools=o.Tools, tokenize=False,
// add_generation_prompt=o.AddGenerationPrompt) does: the template sees
// messages (a list of {role, content} and, where set, tool_calls,
// tool_call_id and name), add_generation_prompt, the special tokens'
// texts, tools (None when there are none) and documents (None), and the
// functions raise_exception, strftime_now, namespace and range.
//
// A tool call's Arguments must be a JSON object's text (an ErrArgument
// error names the message otherwise). A template that raises an exception
// (roles that do not alternate, say) is an ErrTemplate error with the
// template's message.
func (c *ChatTemplate) Render(msgs []Message, o ChatOptions) (string, error) {
	list := make([]value, len(msgs))
	for i, m := range msgs {
		d, err := messageValue(m)
		if err != nil {
			return "", &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: errs.ErrArgument, Path: c.path, Field: fmt.Sprintf("messages[%d]", i), Detail: err.Error()}
		}
		list[i] = d
	}
	var tools value
	if len(o.Tools) > 0 {
		l := make([]value, len(o.Tools))
		for i, tl := range o.Tools {
			tv, err := toolValue(tl)
			if err != nil {
				return "", &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: errs.ErrArgument, Path: c.path, Field: fmt.Sprintf("tools[%d]", i), Detail: err.Error()}
			}
			l[i] = tv
		}
		tools = l
	}
	vars := map[string]value{
		"messages":              list,
		"add_generation_prompt": o.AddGenerationPrompt,
		"tools":                 tools,
		"documents":             nil,
	}
	for k, v := range c.vars {
		vars[k] = v
	}
	out, err := renderTemplate(c.nodes, vars)
	if err != nil {
		var re *raisedError
		if errors.As(err, &re) {
			return "", &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrTemplate, Path: c.path, Detail: "the chat template raised an exception: " + re.msg}
		}
		return "", &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrTemplate, Path: c.path, Detail: "cannot render the chat template", Err: err}
	}
	return out, nil
}

// toolProbe is the function TakesTools offers the template.
const toolProbe = "rocm_go_probe_function"

// TakesTools reports whether the template renders the tools it is given:
// it renders one user message with a probe function and looks for the
// function's name in the text, as llama.cpp probes a template's
// capabilities. Llama 3.1/3.2's and Qwen2.5's templates take tools,
// Llama 2's and Mistral's first templates do not.
func (c *ChatTemplate) TakesTools() bool {
	c.toolsOnce.Do(func() {
		out, err := c.Render([]Message{{Role: "user", Content: "Hi"}}, ChatOptions{AddGenerationPrompt: true,
			Tools: []Tool{{Name: toolProbe, Description: "A probe.", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)}}})
		c.takesTools = err == nil && strings.Contains(out, toolProbe)
	})
	return c.takesTools
}

// messageValue is a message as templates see it.
func messageValue(m Message) (*dict, error) {
	d := newDict()
	d.set("role", m.Role)
	d.set("content", m.Content)
	if len(m.ToolCalls) > 0 {
		calls := make([]value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			args, err := jsonValue([]byte(tc.Arguments))
			if err != nil {
				return nil, fmt.Errorf("tool_calls[%d].arguments is not JSON: %v", i, err)
			}
			if _, ok := args.(*dict); !ok {
				return nil, fmt.Errorf("tool_calls[%d].arguments is a %s, not a JSON object", i, typeName(args))
			}
			fn := newDict()
			fn.set("name", tc.Name)
			fn.set("arguments", args)
			c := newDict()
			if tc.ID != "" {
				c.set("id", tc.ID)
			}
			c.set("type", "function")
			c.set("function", fn)
			calls[i] = c
		}
		d.set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		d.set("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		d.set("name", m.Name)
	}
	return d, nil
}

// toolValue is a tool as templates see it.
func toolValue(t Tool) (*dict, error) {
	fn := newDict()
	fn.set("name", t.Name)
	if t.Description != "" {
		fn.set("description", t.Description)
	}
	if len(t.Parameters) > 0 {
		p, err := jsonValue(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("the parameters of %q are not JSON: %v", t.Name, err)
		}
		fn.set("parameters", p)
	}
	d := newDict()
	d.set("type", "function")
	d.set("function", fn)
	return d, nil
}
