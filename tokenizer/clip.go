package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rocm-go/rocm/errs"
)

// clipPattern is CLIP's word pattern (OpenAI's simple_tokenizer, and
// transformers' conversion of it): contractions, letter runs, single
// digits, runs of other non-space characters.
const clipPattern = `'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+`

// isCLIPDir reports whether dir holds a CLIP tokenizer's vocab.json and
// merges.txt and no tokenizer.json.
func isCLIPDir(dir string) bool {
	for name, want := range map[string]bool{"tokenizer.json": false, "vocab.json": true, "merges.txt": true} {
		_, err := os.Stat(filepath.Join(dir, name))
		if (err == nil) != want {
			return false
		}
	}
	return true
}

// loadCLIP makes the tokenizer of a CLIP tokenizer folder (vocab.json,
// merges.txt, tokenizer_config.json) as transformers' CLIPConverter
// makes a fast tokenizer of it: NFC, whitespace runs to one space and
// lower case; CLIP's word pattern, then byte-level characters; BPE whose
// words end in "</w>"; the BOS and EOS tokens around the text. The
// special tokens are tokenizer_config.json's (OpenAI's
// <|startoftext|> and <|endoftext|> when it has none).
func loadCLIP(op, dir string) (*Tokenizer, error) {
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	var cfg struct {
		jsonTokenizerConfig
		Class string `json:"tokenizer_class"`
	}
	if _, err := readJSON(op, cfgPath, &cfg); err != nil {
		return nil, err
	}
	if cfg.Class != "" && cfg.Class != "CLIPTokenizer" && cfg.Class != "CLIPTokenizerFast" {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrUnsupported, Path: cfgPath, Field: "tokenizer_class",
			Detail: fmt.Sprintf("%q with vocab.json and merges.txt but no tokenizer.json: only CLIP tokenizers load from those (convert the others to tokenizer.json)", cfg.Class)}
	}
	names := map[string]string{"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
	for name, raw := range map[string]json.RawMessage{"bos_token": cfg.BOS, "eos_token": cfg.EOS, "unk_token": cfg.UNK} {
		s, set, err := tokenString(raw)
		if err != nil {
			return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: cfgPath, Field: name, Detail: "neither a string, null nor an object with a content string"}
		}
		if set && s != "" {
			names[name] = s
		}
	}

	vocabPath := filepath.Join(dir, "vocab.json")
	data, err := pkg.ReadFile(op, vocabPath)
	if err != nil {
		return nil, err
	}
	var vocab map[string]int32
	if err := json.Unmarshal(data, &vocab); err != nil {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: vocabPath, Detail: fmt.Sprintf("not a JSON object of token ids: %v", err)}
	}
	ids := map[string]int32{}
	for _, name := range []string{"bos_token", "eos_token", "unk_token"} {
		id, ok := vocab[names[name]]
		if !ok {
			return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: vocabPath, Field: name, Detail: fmt.Sprintf("%q is not in the vocabulary", names[name])}
		}
		ids[name] = id
	}

	merges, err := readMerges(op, filepath.Join(dir, "merges.txt"))
	if err != nil {
		return nil, err
	}

	special := func(name string) map[string]any {
		return map[string]any{"id": ids[name], "content": names[name], "special": true, "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": true}
	}
	added := []map[string]any{special("bos_token")}
	if names["eos_token"] != names["bos_token"] {
		added = append(added, special("eos_token"))
	}
	doc := map[string]any{
		"added_tokens": added,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "NFC"},
			map[string]any{"type": "Replace", "pattern": map[string]string{"Regex": `\s+`}, "content": " "},
			map[string]any{"type": "Lowercase"},
		}},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": clipPattern}, "behavior": "Removed", "invert": true},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false},
		}},
		"post_processor": map[string]any{"type": "RobertaProcessing",
			"sep": []any{names["eos_token"], ids["eos_token"]}, "cls": []any{names["bos_token"], ids["bos_token"]},
			"trim_offsets": false, "add_prefix_space": false},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "end_of_word_suffix": "</w>",
			"continuing_subword_prefix": "", "unk_token": names["unk_token"], "fuse_unk": false},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: dir, Err: err}
	}
	t, err := parse(raw)
	if err != nil {
		return nil, fileError(op, vocabPath, err)
	}
	return t, nil
}

// readMerges reads merges.txt: "a b" per line after a "#version" line.
func readMerges(op, path string) ([]string, error) {
	b, err := pkg.ReadFile(op, path)
	if err != nil {
		return nil, err
	}
	merges := []string{} // a vocabulary may have no merges: every character a token
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if (n == 0 && strings.HasPrefix(line, "#version")) || line == "" {
			continue
		}
		if len(strings.Fields(line)) != 2 {
			return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: path, Detail: fmt.Sprintf("line %d is %q: want two symbols", n+1, line)}
		}
		merges = append(merges, line)
	}
	return merges, nil
}

// Pad is the padding token (tokenizer_config.json's pad_token, read by
// LoadDir), if the tokenizer has one.
func (t *Tokenizer) Pad() (int32, bool) { return t.pad, t.hasPad }

// EncodeWindows encodes text into windows of exactly n tokens, as CLIP
// text encoders take them (n = 77): each is the BOS token, up to n−2 of
// the text's tokens, the EOS token, then padding (Pad). There is one
// window per n−2 tokens of text, and one for empty text. diffusers'
// pipelines encode the first window only (their tokenizer truncates);
// AUTOMATIC1111 and ComfyUI encode every window and concatenate the
// hidden states, so that long prompts count whole.
func (t *Tokenizer) EncodeWindows(text string, n int) ([][]int32, error) {
	const op = "EncodeWindows"
	if n < 3 {
		return nil, pkg.Errorf(op, errs.ErrArgument, "windows of %d tokens: want at least 3 (BOS, a token, EOS)", n)
	}
	eos := t.EOS()
	if !t.hasBOS || len(eos) == 0 || !t.hasPad {
		return nil, pkg.Errorf(op, errs.ErrUnsupported, "the tokenizer has no BOS, EOS or padding token (a CLIP tokenizer folder has all three)")
	}
	ids, err := t.Encode(text, false)
	if err != nil {
		return nil, err
	}
	var out [][]int32
	for start := 0; start == 0 || start < len(ids); start += n - 2 {
		w := make([]int32, 0, n)
		w = append(w, t.bos)
		w = append(w, ids[start:min(start+n-2, len(ids))]...)
		w = append(w, eos[0])
		for len(w) < n {
			w = append(w, t.pad)
		}
		out = append(out, w)
	}
	return out, nil
}
