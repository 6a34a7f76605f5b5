package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/rocm-go/rocm/errs"
)

// Tokenizer turns text into token ids and back, as the Hugging Face
// tokenizers library does with the same tokenizer.json. It is safe for
// concurrent use.
type Tokenizer struct {
	model      *bpe
	normalizer normalizer    // nil: none
	pre        preTokenizer  // nil: the whole piece is one word
	post       postProcessor // nil: none
	decoder    decoder       // nil: tokens joined with spaces

	added     map[int32]*addedToken
	addedIDs  map[string]int32
	special   map[string]bool // contents of the special added tokens
	rawSet    *addedSet       // added tokens matched in the raw text
	normSet   *addedSet       // those matched in normalized text
	vocabSize int

	bos    int32
	hasBOS bool
	eos    []int32
	pad    int32
	hasPad bool

	chat    *ChatTemplate
	chatErr error             // why the tokenizer has no usable chat template
	chatVar map[string]string // bos_token, eos_token, ... for templates
}

type jsonTokenizer struct {
	AddedTokens   []*addedToken   `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

// Load reads a Hugging Face tokenizer.json. The tokenizer it returns has
// the BOS its post-processor adds (if any), no EOS and no chat template:
// LoadDir reads those from the model's other files.
func Load(path string) (*Tokenizer, error) { return load("Load", path) }

// load reads and parses the tokenizer.json at path for op.
func load(op, path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrIO, Path: path, Err: err}
	}
	t, err := parse(data)
	if err != nil {
		return nil, fileError(op, path, err)
	}
	return t, nil
}

func parse(data []byte) (*Tokenizer, error) {
	var jt jsonTokenizer
	if err := json.Unmarshal(data, &jt); err != nil {
		return nil, &fieldError{kind: errs.ErrFormat, field: "(file)", detail: "not valid tokenizer JSON", err: err}
	}
	if isNull(jt.Model) {
		return nil, badField("model", "missing")
	}
	t := &Tokenizer{
		added: make(map[int32]*addedToken), addedIDs: make(map[string]int32), special: make(map[string]bool),
		chatErr: &Error{Pkg: string(pkg), Op: "ApplyChatTemplate", Kind: ErrNoChatTemplate, Detail: "no chat template: load the model directory with LoadDir (it reads tokenizer_config.json)"},
	}
	var err error
	if t.model, err = buildBPE(jt.Model); err != nil {
		return nil, err
	}
	if !isNull(jt.Normalizer) {
		if t.normalizer, err = buildNormalizer("normalizer", jt.Normalizer); err != nil {
			return nil, err
		}
	}
	if !isNull(jt.PreTokenizer) {
		if t.pre, err = buildPreTokenizer("pre_tokenizer", jt.PreTokenizer); err != nil {
			return nil, err
		}
	}
	if !isNull(jt.PostProcessor) {
		if t.post, err = buildPostProcessor("post_processor", jt.PostProcessor); err != nil {
			return nil, err
		}
	}
	if !isNull(jt.Decoder) {
		if t.decoder, err = buildDecoder("decoder", jt.Decoder); err != nil {
			return nil, err
		}
	}
	t.vocabSize = len(t.model.tokens)
	var rawToks, normToks []*addedToken
	var rawPats, normPats []string
	for i, a := range jt.AddedTokens {
		field := fmt.Sprintf("added_tokens[%d]", i)
		if a == nil || a.Content == "" {
			return nil, badField(field, "has no content")
		}
		if a.ID < 0 {
			return nil, badField(field+".id", "%d is negative", a.ID)
		}
		// As in the Rust library, a token the model already has keeps the
		// model's id.
		if id, ok := t.model.vocab[a.Content]; ok {
			a.ID = id
		}
		if prev, ok := t.added[a.ID]; ok && prev.Content != a.Content {
			return nil, badField(field+".id", "%d is also the id of added token %q", a.ID, prev.Content)
		}
		t.added[a.ID] = a
		t.addedIDs[a.Content] = a.ID
		if a.Special {
			t.special[a.Content] = true
		}
		t.vocabSize = max(t.vocabSize, int(a.ID)+1)
		if a.Normalized == nil || *a.Normalized {
			pat := a.Content
			if t.normalizer != nil {
				pat = t.normalizer.normalize(pat)
			}
			normToks, normPats = append(normToks, a), append(normPats, pat)
		} else {
			rawToks, rawPats = append(rawToks, a), append(rawPats, a.Content)
		}
	}
	t.rawSet = newAddedSet(rawToks, rawPats)
	t.normSet = newAddedSet(normToks, normPats)
	if t.post != nil {
		for _, ids := range specialIDs(t.post) {
			if ids < 0 || int(ids) >= t.vocabSize {
				return nil, badField("post_processor", "special token id %d is outside the vocabulary (size %d)", ids, t.vocabSize)
			}
		}
		t.bos, t.hasBOS = bosOf(t.post)
	}
	return t, nil
}

// specialIDs lists every id a post-processor adds.
func specialIDs(p postProcessor) []int32 {
	var ids []int32
	switch x := p.(type) {
	case templatePost:
		for _, s := range x {
			ids = append(ids, s...)
		}
	case postSeq:
		for _, y := range x {
			ids = append(ids, specialIDs(y)...)
		}
	}
	return ids
}

// Encode returns the token ids of text. addSpecial adds the special tokens
// the tokenizer.json's post-processor adds (Llama's BOS, for example).
// Added and special tokens written in text ("<|eot_id|>") are matched
// before the model sees the text, as in the Rust library, so that a
// rendered chat template encodes to its special tokens: encode such text
// with addSpecial false (the template already holds the BOS), and do not
// pass untrusted text that may spell special tokens.
//
// text must be valid UTF-8: any replacement would silently change the
// prompt, so invalid text is an errs.ErrArgument error naming the first bad byte
// (strings.ToValidUTF8 converts such text, if that is what is wanted).
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int32, error) {
	if !utf8.ValidString(text) {
		off := 0
		for off < len(text) {
			r, n := utf8.DecodeRuneInString(text[off:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			off += n
		}
		return nil, &Error{Pkg: string(pkg), Op: "Encode", Kind: errs.ErrArgument,
			Detail: fmt.Sprintf("text is not valid UTF-8 (byte %d is 0x%02X); convert it first, with strings.ToValidUTF8 for example", off, text[off])}
	}
	ids := make([]int32, 0, len(text)/4+4)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	pieces := sc.pieces[:0]
	t.rawSet.split(text, func(span string, start int, id int32) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		first := start == 0
		if t.normalizer != nil {
			span = t.normalizer.normalize(span)
		}
		t.normSet.split(span, func(s string, start2 int, id int32) {
			if id >= 0 {
				ids = append(ids, id)
				return
			}
			if t.pre == nil {
				ids = t.model.tokenize(ids, s)
				return
			}
			pieces = t.pre.split(pieces[:0], piece{s: s, first: first && start2 == 0})
			for _, p := range pieces {
				if p.byteLevel {
					ids = t.model.tokenizeByteLevel(ids, p.s, &sc.buf)
				} else {
					ids = t.model.tokenize(ids, p.s)
				}
			}
		})
	})
	clear(pieces) // keep no reference to text in the pool
	sc.pieces = pieces[:0]
	if addSpecial && t.post != nil {
		ids = t.post.process(ids)
	}
	return ids, nil
}

// scratch is the reusable memory of one Encode.
type scratch struct {
	pieces []piece
	buf    []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// tokens returns the strings of ids: added tokens' contents, else the
// model's tokens. Ids that are neither are left out, as in the Rust
// library, and so are special tokens when skipSpecial is set.
func (t *Tokenizer) tokens(ids []int32, skipSpecial bool) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		var s string
		if a, ok := t.added[id]; ok {
			s = a.Content
		} else if id >= 0 && int(id) < len(t.model.tokens) && t.model.has[id] {
			s = t.model.tokens[id]
		} else {
			continue
		}
		if skipSpecial && t.special[s] {
			continue
		}
		out = append(out, s)
	}
	return out
}

func (t *Tokenizer) decode(ids []int32, skipSpecial, raw bool) string {
	toks := t.tokens(ids, skipSpecial)
	if t.decoder == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.decoder.decodeChain(toks, raw), "")
}

// Decode returns the text of ids, as the Rust library's decode does: ids
// outside the vocabulary are left out, skipSpecial leaves out special
// tokens (BOS, EOS, <|eot_id|>, ...), and bytes that do not form valid
// UTF-8 become U+FFFD.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	return t.decode(ids, skipSpecial, false)
}

// TokenBytes returns the bytes of id decoded on its own, as a report of
// each token of a text wants them (OpenAI's log-probabilities): byte-level
// and byte-fallback bytes as they are, even those of part of a character;
// a special token's content; nil for an id that is no token. A decoder that
// strips the start of a sequence (Metaspace's leading space) strips it
// from the token too.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	return []byte(t.decode([]int32{id}, false, true))
}

// VocabSize returns the number of token ids: one more than the largest id
// of the model's vocabulary and the added tokens. (A model's embedding
// table may have more rows than this.)
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token given as its string in the
// vocabulary ("<|eot_id|>", "▁the", "Ġthe"), if it has one.
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	if id, ok := t.addedIDs[token]; ok {
		return id, true
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// Token returns the vocabulary string of id, if id is a token.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if a, ok := t.added[id]; ok {
		return a.Content, true
	}
	if id >= 0 && int(id) < len(t.model.tokens) && t.model.has[id] {
		return t.model.tokens[id], true
	}
	return "", false
}

// IsSpecial reports whether id is a special token (one that Decode with
// skipSpecial leaves out).
func (t *Tokenizer) IsSpecial(id int32) bool {
	s, ok := t.Token(id)
	return ok && t.special[s]
}

// BOS returns the beginning-of-sequence token: tokenizer_config.json's
// bos_token when LoadDir found one (Qwen's is null: no BOS), else the first
// special token the post-processor adds.
func (t *Tokenizer) BOS() (int32, bool) { return t.bos, t.hasBOS }

// EOS returns every end-of-sequence id: tokenizer_config.json's eos_token
// and generation_config.json's eos_token_id (a number or a list), without
// repeats. Load reads neither file, so its tokenizers have none.
func (t *Tokenizer) EOS() []int32 { return append([]int32(nil), t.eos...) }

// Pieces returns the bytes each token adds to a text in the middle of a
// sequence, by id (VocabSize of them): a byte-level token's bytes, a
// byte-fallback token's one byte (possibly part of a UTF-8 character), a
// SentencePiece token with its leading space. Special tokens have none
// (nil). Constrained decoding matches these bytes against a grammar.
func (t *Tokenizer) Pieces() [][]byte {
	out := make([][]byte, t.vocabSize)
	// Each token is decoded after an anchor, so that decoders that treat
	// the start of a sequence apart (Metaspace, Strip) see it mid-text.
	anchor, prefix := int32(-1), ""
	for id := int32(0); int(id) < t.vocabSize; id++ {
		if t.IsSpecial(id) {
			continue
		}
		if s := t.decode([]int32{id}, false, true); s != "" && utf8.ValidString(s) {
			anchor, prefix = id, s
			break
		}
	}
	for id := int32(0); int(id) < t.vocabSize; id++ {
		if _, ok := t.Token(id); !ok || t.IsSpecial(id) {
			continue
		}
		s := t.decode([]int32{id}, false, true)
		if anchor >= 0 {
			if both := t.decode([]int32{anchor, id}, false, true); strings.HasPrefix(both, prefix) {
				s = both[len(prefix):]
			}
		}
		if s != "" {
			out[id] = []byte(s)
		}
	}
	return out
}
