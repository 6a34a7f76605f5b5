package grammar

import (
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/tokenizer"
)

// FromTokenizer builds the vocabulary trie of a tokenizer from each
// token's bytes (tokenizer.Tokenizer.Pieces): byte-level BPE and
// SentencePiece byte fallback alike. Build it once per tokenizer.
func FromTokenizer(t *tokenizer.Tokenizer) (*Vocab, error) {
	if t == nil {
		return nil, pkg.Errorf("FromTokenizer", errs.ErrArgument, "a nil tokenizer")
	}
	return NewVocab(t.Pieces())
}
