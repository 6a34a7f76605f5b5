package tokenizer

import "strings"

// StreamDecoder decodes a sequence one token at a time, as a model
// generates it. Add returns only text that is complete: a character whose
// bytes are spread over several tokens (byte-level BPE, SentencePiece byte
// fallback) comes out whole once its last byte arrives, and the leading
// space a Metaspace or Strip decoder removes from a sequence is removed
// only at the start of the stream. The text of all Adds followed by Flush
// is the Decode of all the ids, except that an invalid byte sequence
// becomes one U+FFFD per maximal invalid subsequence (as in Rust's
// from_utf8_lossy) where Decode's byte fallback gives one per byte.
//
// A StreamDecoder is not safe for concurrent use; make one per sequence.
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	// window holds the ids since the start of the last emitted stretch:
	// window[:done] were emitted by the previous Add that returned text and
	// give the context (prefix, their text) that later ones are decoded in.
	window []int32
	done   int
	prefix string
}

// NewStreamDecoder returns a StreamDecoder for one sequence; skipSpecial
// leaves special tokens out, as in Decode.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Add appends id to the sequence and returns the text that became
// complete, valid UTF-8 (often "", while a character is unfinished).
func (d *StreamDecoder) Add(id int32) string {
	d.window = append(d.window, id)
	raw := d.t.decode(d.window, d.skipSpecial, true)
	if incompleteTail(raw) {
		return ""
	}
	text := lossyString(raw)
	if len(text) <= len(d.prefix) || !strings.HasPrefix(text, d.prefix) {
		return ""
	}
	out := text[len(d.prefix):]
	n := copy(d.window, d.window[d.done:])
	d.window = d.window[:n]
	d.done = n
	d.prefix = lossyString(d.t.decode(d.window, d.skipSpecial, true))
	return out
}

// Flush returns the text still held back (an unfinished character, as
// U+FFFD) and resets the decoder for a new sequence.
func (d *StreamDecoder) Flush() string {
	text := lossyString(d.t.decode(d.window, d.skipSpecial, true))
	out := ""
	if len(text) > len(d.prefix) && strings.HasPrefix(text, d.prefix) {
		out = text[len(d.prefix):]
	}
	d.window, d.done, d.prefix = d.window[:0], 0, ""
	return out
}
