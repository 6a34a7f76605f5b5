package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rocm-go/rocm/errs"
)

// Message is one turn of a chat: Role is "system", "user" or "assistant"
// (or whatever else the model's template knows), Content its text.
type Message struct{ Role, Content string }

// chatTemplate is a parsed Jinja2 chat template and where it came from.
type chatTemplate struct {
	nodes []jnode
	path  string
}

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
	t.chat, t.chatErr = &chatTemplate{nodes: nodes, path: path}, nil
}

// ApplyChatTemplate renders msgs with the model's chat template, as
// transformers' apply_chat_template(msgs, tokenize=False,
// add_generation_prompt=addGenerationPrompt) does: the template sees
// messages (a list of {role, content}), add_generation_prompt, bos_token,
// eos_token, unk_token and pad_token (those tokenizer_config.json names),
// tools and documents (none), and the functions raise_exception,
// strftime_now, namespace and range.
//
// The result usually starts with the BOS text ("<s>",
// "<|begin_of_text|>"): encode it with addSpecial false. A template that
// raises an exception (roles that do not alternate, say) is an ErrTemplate
// error with the template's message.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.chat == nil {
		return "", t.chatErr
	}
	list := make([]value, len(msgs))
	for i, m := range msgs {
		d := newDict()
		d.set("role", m.Role)
		d.set("content", m.Content)
		list[i] = d
	}
	vars := map[string]value{
		"messages":              list,
		"add_generation_prompt": addGenerationPrompt,
		"tools":                 nil,
		"documents":             nil,
	}
	for k, v := range t.chatVar {
		vars[k] = v
	}
	out, err := renderTemplate(t.chat.nodes, vars)
	if err != nil {
		detail := "cannot render the chat template"
		var re *raisedError
		if errors.As(err, &re) {
			return "", &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrTemplate, Path: t.chat.path, Detail: "the chat template raised an exception: " + re.msg}
		}
		return "", &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrTemplate, Path: t.chat.path, Detail: detail, Err: err}
	}
	return out, nil
}
