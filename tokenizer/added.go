package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of a tokenizer.json's "added_tokens": a token
// matched in the text before the model sees it.
type addedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedSet finds a set of added tokens in text: leftmost match first,
// the longest one there, as the Rust library's Aho-Corasick automaton
// (MatchKind::LeftmostLongest) does.
type addedSet struct {
	toks  []*addedToken
	first [256]bool        // bytes that start some pattern
	next  map[uint64]int32 // (node << 8 | byte) -> child node
	term  []int32          // node -> index in toks, or -1
}

func newAddedSet(toks []*addedToken, patterns []string) *addedSet {
	a := &addedSet{toks: toks, next: make(map[uint64]int32), term: []int32{-1}}
	for k, p := range patterns {
		if p == "" {
			continue
		}
		a.first[p[0]] = true
		node := int32(0)
		for i := 0; i < len(p); i++ {
			key := uint64(node)<<8 | uint64(p[i])
			nx, ok := a.next[key]
			if !ok {
				nx = int32(len(a.term))
				a.term = append(a.term, -1)
				a.next[key] = nx
			}
			node = nx
		}
		if a.term[node] < 0 { // the first of equal patterns wins
			a.term[node] = int32(k)
		}
	}
	return a
}

// longest returns the longest pattern that starts s, if any.
func (a *addedSet) longest(s string) (tok *addedToken, n int) {
	node := int32(0)
	best := int32(-1)
	for j := 0; j < len(s); j++ {
		nx, ok := a.next[uint64(node)<<8|uint64(s[j])]
		if !ok {
			break
		}
		node = nx
		if a.term[node] >= 0 {
			best, n = a.term[node], j+1
		}
	}
	if best < 0 {
		return nil, 0
	}
	return a.toks[best], n
}

// split calls fn for each span of s in order: an added token (id >= 0,
// with the whitespace its lstrip/rstrip take) or the text between them
// (id < 0). start is the span's offset in s.
func (a *addedSet) split(s string, fn func(span string, start int, id int32)) {
	if a == nil || len(a.toks) == 0 {
		if s != "" {
			fn(s, 0, -1)
		}
		return
	}
	done := 0 // s[:done] has been passed to fn
	for i := 0; i < len(s); {
		if !a.first[s[i]] {
			i++
			continue
		}
		tok, n := a.longest(s[i:])
		if tok == nil {
			i++
			continue
		}
		start, end := i, i+n
		i = end
		if tok.SingleWord && (endsWithWord(s[:start]) || startsWithWord(s[end:])) {
			continue
		}
		if tok.LStrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), done)
		}
		if tok.RStrip {
			end = len(s) - len(strings.TrimLeftFunc(s[end:], unicode.IsSpace))
			i = end
		}
		if done < start {
			fn(s[done:start], done, -1)
		}
		fn(s[start:end], start, tok.ID)
		done = end
	}
	if done < len(s) {
		fn(s[done:], done, -1)
	}
}

// isWordChar is the Rust regex crate's Unicode \w.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
