package mkmodel

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
)

// The tokenizer is byte-level BPE in Hugging Face's tokenizer.json format,
// as Llama 3's: the 256 bytes as tokens 0..255 (in GPT-2's byte-to-unicode
// alphabet), then the merges learnt from corpus below, then the special
// tokens (at Spec.SpecialBase, or right after the merges), with Llama 3's
// pre-tokenizer regex, a ByteLevel decoder and a post-processor that adds
// <|begin_of_text|>.

// corpus is the text the merges are learnt from: plain English about
// what the models here are for.
const corpus = `The quick brown fox jumps over the lazy dog. A language model reads a sequence of tokens and predicts the next one.
It learns from a great deal of text, and then it writes one token at a time, each chosen from what came before.
This model was made by a small program with random weights, so what it writes means nothing at all; it is here to
show that every part of the system works together: the tokenizer splits the text into tokens, the model turns the
tokens into numbers, the numbers into a distribution over the next token, and the sampler picks one of them.
When the worker starts, it loads the weights onto the device, warms up the kernels and listens for requests.
Each request is a conversation: a system message, then the user's question, then the assistant's answer.
The server streams the answer back as it is written, token by token, and reports how many tokens per second
it reached. Many requests can run at the same time: their tokens share the device in one batch at each step,
and their keys and values share one cache of pages, which are given back when a request is done.
Hello! How are you today? I am fine, thank you. What is the weather like in the morning and in the evening?
It is warm and sunny in the summer, cold and dark in the winter, and it rains a lot in the spring and the autumn.
There are 7 days in a week, 12 months in a year, 24 hours in a day, 60 minutes in an hour and 60 seconds in a minute.
Numbers like 1, 2, 3, 10, 100, 1000 and 2026 are written with digits. Words are written with letters.
Please write a short story about a robot who wants to learn how to paint pictures of the sea.
Once upon a time there was a little robot that lived in a house by the sea. Every day it watched the waves.
Then one day it found a brush and some paint, and it started to paint what it saw: the water, the sky, the birds.`

// byteUnicode is GPT-2's map of bytes to printable characters: the
// printable bytes stand for themselves, the rest take the code points from
// 256 up, in order.
var byteUnicode = func() (m [256]rune) {
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}()

// llama3Split is Llama 3's pre-tokenizer pattern (it needs lookahead:
// tokenizers use a regex engine that has it).
const llama3Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// trainSplit approximates it with Go's regexp (no lookahead) to split
// the corpus into the words the merges are learnt within.
var trainSplit = regexp.MustCompile(`'(?:s|t|re|ve|m|ll|d)|[^\r\n\pL\pN]?\pL+|\pN{1,3}| ?[^\s\pL\pN]+[\r\n]*|\s*[\r\n]+|\s+`)

// bpe is a trained tokenizer: its merges in order (each pair of tokens),
// and the tokens they make, each once (two merges may make one token).
type bpe struct {
	merges [][2]string
	tokens []string
}

var trained struct {
	mu sync.Mutex
	m  map[int]*bpe
}

// trainBPE learns up to n merges from the corpus, most frequent pair
// first (ties by the pair's text), as a BPE trainer does; the result is
// the same on every run.
func trainBPE(n int) *bpe {
	trained.mu.Lock()
	defer trained.mu.Unlock()
	if b := trained.m[n]; b != nil {
		return b
	}
	counts := map[string]int{}
	for _, w := range trainSplit.FindAllString(corpus, -1) {
		counts[w]++
	}
	type word struct {
		syms  []string
		count int
	}
	var words []word
	keys := make([]string, 0, len(counts))
	for w := range counts {
		keys = append(keys, w)
	}
	sort.Strings(keys)
	for _, w := range keys {
		var syms []string
		for _, b := range []byte(w) {
			syms = append(syms, string(byteUnicode[b]))
		}
		words = append(words, word{syms, counts[w]})
	}
	b := &bpe{}
	known := map[string]bool{}
	for len(b.merges) < n {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best [2]string
		bestN := 0
		for p, c := range pairs {
			if c > bestN || (c == bestN && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			break
		}
		b.merges = append(b.merges, best)
		joined := best[0] + best[1]
		if !known[joined] {
			known[joined] = true
			b.tokens = append(b.tokens, joined)
		}
		for wi := range words {
			s := words[wi].syms
			out := s[:0:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, joined)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			words[wi].syms = out
		}
	}
	if trained.m == nil {
		trained.m = map[int]*bpe{}
	}
	trained.m[n] = b
	return b
}

// specialCount is how many special tokens a tokenizer without a fixed
// base has.
const specialCount = 16

// specialBase is the id of <|begin_of_text|>.
func (s *Spec) specialBase(b *bpe) int {
	if s.SpecialBase > 0 {
		return s.SpecialBase
	}
	if b == nil {
		b = trainBPE(s.Merges)
	}
	return 256 + len(b.tokens)
}

// tokenizerSize is the ids the tokenizer uses (the model's vocabulary must
// hold them).
func (s *Spec) tokenizerSize() int {
	if s.SpecialBase > 0 {
		return max(s.SpecialBase+specialCount, s.Vocab)
	}
	return s.specialBase(nil) + specialCount
}

// specials names the special tokens from base to vocab (Llama 3's names
// and offsets).
func specials(base, vocab int) []string {
	n := max(vocab-base, 10)
	names := make([]string, n)
	reserved := 0
	for i := range names {
		switch i {
		case 0:
			names[i] = "<|begin_of_text|>"
		case 1:
			names[i] = "<|end_of_text|>"
		case 6:
			names[i] = "<|start_header_id|>"
		case 7:
			names[i] = "<|end_header_id|>"
		case 9:
			names[i] = "<|eot_id|>"
		default:
			names[i] = "<|reserved_special_token_" + strconv.Itoa(reserved) + "|>"
			reserved++
		}
	}
	return names
}

// tokenizerJSON is tokenizer.json.
func (b *bpe) tokenizerJSON(base, vocabSize int) map[string]any {
	vocab := map[string]int{}
	for i, r := range byteUnicode {
		vocab[string(r)] = i
	}
	for i, t := range b.tokens {
		vocab[t] = 256 + i
	}
	merges := make([]string, len(b.merges))
	for i, m := range b.merges {
		merges[i] = m[0] + " " + m[1]
	}
	var added []map[string]any
	for i, name := range specials(base, vocabSize) {
		added = append(added, map[string]any{"id": base + i, "content": name, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	bos := "<|begin_of_text|>"
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Split}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			map[string]any{"type": "TemplateProcessing",
				"single": []any{
					map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}},
					map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				},
				"pair": []any{
					map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}},
					map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
					map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 1}},
					map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}},
				},
				"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int{base}, "tokens": []string{bos}}},
			},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
			"vocab": vocab, "merges": merges},
	}
}

// chatTemplate is Llama 3 Instruct's chat template.
const chatTemplate = `{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %}`

// tokenizerConfig is tokenizer_config.json.
func tokenizerConfig(base, vocab, maxLen int) map[string]any {
	dec := map[string]any{}
	for i, name := range specials(base, vocab) {
		dec[fmt.Sprint(base+i)] = map[string]any{"content": name, "lstrip": false, "normalized": false, "rstrip": false,
			"single_word": false, "special": true}
	}
	return map[string]any{
		"added_tokens_decoder":         dec,
		"bos_token":                    "<|begin_of_text|>",
		"eos_token":                    "<|eot_id|>",
		"chat_template":                chatTemplate,
		"clean_up_tokenization_spaces": true,
		"model_input_names":            []string{"input_ids", "attention_mask"},
		"model_max_length":             maxLen,
		"tokenizer_class":              "PreTrainedTokenizerFast",
	}
}
