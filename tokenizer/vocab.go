package tokenizer

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rocm-go/rocm/errs"
)

// Vocab is a tokenizer as llama.cpp's GGUF files hold it (the
// tokenizer.ggml.* metadata), in plain Go values: FromVocab builds the
// Tokenizer that encodes and decodes as the equivalent tokenizer.json.
type Vocab struct {
	// Model is "gpt2" (byte-level BPE: Llama 3, Qwen2, GPT-2) or "llama"
	// (SentencePiece BPE with byte fallback: Llama 2, Mistral).
	Model string
	// Pre names the pre-tokenizer of a gpt2 model (tokenizer.ggml.pre):
	// "llama-bpe" (also "llama3", "llama-v3"), "qwen2", "gpt-2" or
	// "default"; PreNames lists them.
	Pre    string
	Tokens []string  // by id
	Scores []float32 // by id; a llama model's merge priorities
	// Types by id: 1 normal, 2 unknown, 3 control, 4 user-defined, 5
	// unused, 6 byte (llama.cpp's); nil: all normal.
	Types  []int32
	Merges []string // "a b", best first (gpt2)
	// BOS, EOS, EOT, Unknown: token ids, -1 for none.
	BOS, EOS, EOT, Unknown int32
	// AddBOS: encodings with special tokens start with BOS.
	AddBOS bool
	// AddSpacePrefix: a llama model's text gets a leading space
	// (tokenizer.ggml.add_space_prefix; llama.cpp's default is true).
	AddSpacePrefix bool
	ChatTemplate   string
}

// The token types of Vocab.Types.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// preSplits are the split regexes of the gpt2 pre-tokenizers (llama.cpp's
// llama-vocab.cpp names).
var preSplits = map[string]string{
	"llama-bpe": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"qwen2":     `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"gpt-2":     `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
}

var preAliases = map[string]string{"llama3": "llama-bpe", "llama-v3": "llama-bpe", "default": "gpt-2", "gpt2": "gpt-2", "": "gpt-2"}

// PreNames lists the gpt2 pre-tokenizers FromVocab knows.
func PreNames() []string {
	var names []string
	for k := range preSplits {
		names = append(names, k)
	}
	for k := range preAliases {
		if k != "" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

func vocabErr(field, format string, args ...any) error {
	return &Error{Pkg: string(pkg), Op: "FromVocab", Kind: errs.ErrFormat, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// FromVocab builds a tokenizer from a GGUF-style vocabulary.
func FromVocab(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, vocabErr("tokens", "empty vocabulary")
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, vocabErr("token_type", "%d types for %d tokens", len(v.Types), n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, vocabErr("scores", "%d scores for %d tokens", len(v.Scores), n)
	}
	for _, id := range []struct {
		name string
		id   int32
	}{{"bos_token_id", v.BOS}, {"eos_token_id", v.EOS}, {"eot_token_id", v.EOT}, {"unknown_token_id", v.Unknown}} {
		if id.id < -1 || int(id.id) >= n {
			return nil, vocabErr(id.name, "%d is not a token id (the vocabulary has %d)", id.id, n)
		}
	}
	typ := func(i int) int32 {
		if v.Types == nil {
			return TypeNormal
		}
		return v.Types[i]
	}
	seen := make(map[string]int, n)
	vocab := make(map[string]int, n)
	var added []map[string]any
	for i, tok := range v.Tokens {
		if j, dup := seen[tok]; dup {
			return nil, vocabErr("tokens", "tokens %d and %d are both %q", j, i, tok)
		}
		seen[tok] = i
		switch t := typ(i); t {
		case TypeControl, TypeUserDefined:
			added = append(added, map[string]any{"id": i, "content": tok, "single_word": false, "lstrip": false, "rstrip": false,
				"normalized": false, "special": t == TypeControl})
			if v.Model == "llama" {
				vocab[tok] = i
			}
		case TypeNormal, TypeUnknown, TypeUnused, TypeByte:
			vocab[tok] = i
		default:
			return nil, vocabErr("token_type", "token %d (%q) has type %d: want 1 to 6", i, tok, t)
		}
	}
	doc := map[string]any{"version": "1.0", "added_tokens": added}
	model := map[string]any{"type": "BPE", "vocab": vocab, "ignore_merges": false}
	switch v.Model {
	case "gpt2":
		pre := v.Pre
		if a, ok := preAliases[pre]; ok {
			pre = a
		}
		split, ok := preSplits[pre]
		if !ok {
			return nil, vocabErr("pre", "%q is not a pre-tokenizer FromVocab knows: want one of %s", v.Pre, strings.Join(PreNames(), ", "))
		}
		for i, m := range v.Merges {
			a, b, ok := strings.Cut(m, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, vocabErr("merges", "merge %d (%q) is not two tokens split by a space", i, m)
			}
			if _, ok := vocab[a]; !ok {
				return nil, vocabErr("merges", "merge %d (%q): %q is not a token", i, m, a)
			}
			if _, ok := vocab[b]; !ok {
				return nil, vocabErr("merges", "merge %d (%q): %q is not a token", i, m, b)
			}
		}
		model["merges"] = append([]string{}, v.Merges...)
		model["ignore_merges"] = pre == "llama-bpe"
		doc["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": split}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}}
		doc["decoder"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
	case "llama":
		if v.Scores == nil {
			return nil, vocabErr("scores", "a llama (SentencePiece) vocabulary needs its scores")
		}
		model["merges"] = spmMerges(v, typ)
		model["byte_fallback"] = true
		model["fuse_unk"] = true
		if v.Unknown >= 0 {
			model["unk_token"] = v.Tokens[v.Unknown]
		}
		var norms []any
		if v.AddSpacePrefix {
			norms = append(norms, map[string]any{"type": "Prepend", "prepend": "▁"})
		}
		norms = append(norms, map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"})
		doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": norms}
		decs := []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
		}
		if v.AddSpacePrefix {
			decs = append(decs, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
		}
		doc["decoder"] = map[string]any{"type": "Sequence", "decoders": decs}
	default:
		return nil, vocabErr("model", "%q: FromVocab builds gpt2 (byte-level BPE) and llama (SentencePiece) tokenizers", v.Model)
	}
	doc["model"] = model
	if v.AddBOS {
		if v.BOS < 0 {
			return nil, vocabErr("add_bos_token", "true, but the vocabulary has no BOS")
		}
		bos := v.Tokens[v.BOS]
		seq := func(id string, typeID int) map[string]any {
			return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typeID}}
		}
		spec := func(typeID int) map[string]any {
			return map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": typeID}}
		}
		doc["post_processor"] = map[string]any{"type": "TemplateProcessing",
			"single":         []any{spec(0), seq("A", 0)},
			"pair":           []any{spec(0), seq("A", 0), spec(1), seq("B", 1)},
			"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int32{v.BOS}, "tokens": []string{bos}}},
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, vocabErr("(all)", "%v", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, &Error{Pkg: string(pkg), Op: "FromVocab", Kind: errs.ErrFormat, Detail: "the vocabulary as tokenizer.json", Err: err}
	}
	t.chatVar = map[string]string{}
	t.hasBOS = v.BOS >= 0
	if t.hasBOS {
		t.bos = v.BOS
		t.chatVar["bos_token"] = v.Tokens[v.BOS]
	}
	for _, id := range []int32{v.EOS, v.EOT} {
		if id >= 0 {
			t.eos = appendNew(t.eos, id)
		}
	}
	if v.EOS >= 0 {
		t.chatVar["eos_token"] = v.Tokens[v.EOS]
	}
	if v.Unknown >= 0 {
		t.chatVar["unk_token"] = v.Tokens[v.Unknown]
	}
	if v.ChatTemplate != "" {
		t.setChatTemplate(v.ChatTemplate, "tokenizer.chat_template")
	} else {
		t.chatErr = &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrNoChatTemplate, Detail: "the vocabulary has no chat template"}
	}
	return t, nil
}

// spmMerges derives a SentencePiece vocabulary's merges from its scores,
// as Hugging Face's converter does: every split of a normal token into two
// tokens is a merge, and merges producing higher-scored tokens come first.
func spmMerges(v Vocab, typ func(int) int32) []string {
	type merge struct {
		a, b  string
		score float32
		ia    int
		ib    int
	}
	ids := make(map[string]int, len(v.Tokens))
	for i, t := range v.Tokens {
		if typ(i) == TypeNormal || typ(i) == TypeUserDefined {
			ids[t] = i
		}
	}
	var ms []merge
	for i, t := range v.Tokens {
		if typ(i) != TypeNormal || utf8.RuneCountInString(t) < 2 {
			continue
		}
		for k := range t {
			if k == 0 {
				continue
			}
			ia, okA := ids[t[:k]]
			ib, okB := ids[t[k:]]
			if okA && okB {
				ms = append(ms, merge{t[:k], t[k:], v.Scores[i], ia, ib})
			}
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].score != ms[j].score {
			return ms[i].score > ms[j].score
		}
		return cmp.Or(cmp.Compare(ms[i].ia, ms[j].ia), cmp.Compare(ms[i].ib, ms[j].ib)) < 0
	})
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.a + " " + m.b
	}
	return out
}
