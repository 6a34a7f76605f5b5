package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/rocm-go/rocm/errs"
)

// bpe is a byte-pair-encoding model: a vocabulary and ranked merges.
type bpe struct {
	vocab  map[string]int32
	tokens []string // by id; "" where has is false
	has    []bool

	merges map[uint64]mergeRule // (left id, right id) -> rule

	unk          int32 // -1: none
	fuseUnk      bool
	byteFallback bool
	byteIDs      [256]int32 // "<0xNN>" ids, -1 where missing
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix

	cacheMu sync.RWMutex
	cache   map[string][]int32
}

type mergeRule struct{ rank, id int32 }

const (
	// The Rust library's cache sizes: entries, and the longest word kept.
	cacheCapacity = 10000
	cacheMaxWord  = 256
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

type jsonModel struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 *bool            `json:"fuse_unk"`
	ByteFallback            *bool            `json:"byte_fallback"`
	IgnoreMerges            *bool            `json:"ignore_merges"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

func buildBPE(raw json.RawMessage) (*bpe, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, &fieldError{kind: errs.ErrFormat, field: "model", detail: "not a valid model object", err: err}
	}
	if head.Type != "" && head.Type != "BPE" {
		return nil, unsupported("model.type", "%q is not supported (only BPE is)", head.Type)
	}
	var jm jsonModel
	if err := json.Unmarshal(raw, &jm); err != nil {
		return nil, &fieldError{kind: errs.ErrFormat, field: "model", detail: "not a valid model object", err: err}
	}
	if jm.Type == "" && (jm.Vocab == nil || isNull(jm.Merges)) {
		return nil, badField("model.type", "missing, and the model is not a BPE (it has no vocab and merges)")
	}
	if jm.Vocab == nil {
		return nil, badField("model.vocab", "missing")
	}
	if jm.Dropout != nil && *jm.Dropout != 0 {
		return nil, unsupported("model.dropout", "%v: BPE dropout (random merges) is for training, not inference", *jm.Dropout)
	}
	m := &bpe{
		vocab: jm.Vocab, unk: -1, cache: make(map[string][]int32),
		fuseUnk:      jm.FuseUnk != nil && *jm.FuseUnk,
		byteFallback: jm.ByteFallback != nil && *jm.ByteFallback,
		ignoreMerges: jm.IgnoreMerges != nil && *jm.IgnoreMerges,
	}
	if jm.ContinuingSubwordPrefix != nil {
		m.prefix = *jm.ContinuingSubwordPrefix
	}
	if jm.EndOfWordSuffix != nil {
		m.suffix = *jm.EndOfWordSuffix
	}
	maxID := int32(-1)
	for tok, id := range m.vocab {
		if id < 0 {
			return nil, badField("model.vocab", "token %q has negative id %d", tok, id)
		}
		maxID = max(maxID, id)
	}
	m.tokens = make([]string, maxID+1)
	m.has = make([]bool, maxID+1)
	for tok, id := range m.vocab {
		if m.has[id] {
			return nil, badField("model.vocab", "id %d is given to both %q and %q", id, m.tokens[id], tok)
		}
		m.tokens[id], m.has[id] = tok, true
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[byteTokens[b]]; ok {
			m.byteIDs[b] = id
		}
	}
	if jm.UnkToken != nil {
		id, ok := m.vocab[*jm.UnkToken]
		if !ok {
			return nil, badField("model.unk_token", "%q is not in model.vocab", *jm.UnkToken)
		}
		m.unk = id
	}
	pairs, err := parseMerges(jm.Merges)
	if err != nil {
		return nil, err
	}
	m.merges = make(map[uint64]mergeRule, len(pairs))
	for rank, p := range pairs {
		field := fmt.Sprintf("model.merges[%d]", rank)
		a, ok := m.vocab[p[0]]
		if !ok {
			return nil, badField(field, "token %q is not in model.vocab", p[0])
		}
		b, ok := m.vocab[p[1]]
		if !ok {
			return nil, badField(field, "token %q is not in model.vocab", p[1])
		}
		merged := p[0] + strings.TrimPrefix(p[1], m.prefix)
		id, ok := m.vocab[merged]
		if !ok {
			return nil, badField(field, "the merge of %q and %q, %q, is not in model.vocab", p[0], p[1], merged)
		}
		m.merges[pairKey(a, b)] = mergeRule{int32(rank), id}
	}
	return m, nil
}

// parseMerges reads merges in either format: "a b" strings (split at the
// one space; "#version" lines skipped), or ["a", "b"] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, badField("model.merges", "missing")
	}
	// The first element's opening character tells the format apart,
	// without decoding the list twice.
	inner := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(raw)), "["))
	var lists [][]string
	if strings.HasPrefix(inner, "[") && json.Unmarshal(raw, &lists) == nil {
		pairs := make([][2]string, len(lists))
		for i, l := range lists {
			if len(l) != 2 {
				return nil, badField(fmt.Sprintf("model.merges[%d]", i), "has %d tokens, not 2", len(l))
			}
			pairs[i] = [2]string{l[0], l[1]}
		}
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, &fieldError{kind: errs.ErrFormat, field: "model.merges", detail: `neither a list of "a b" strings nor a list of ["a", "b"] pairs`, err: err}
	}
	pairs := make([][2]string, 0, len(lines))
	for _, l := range lines {
		if strings.HasPrefix(l, "#version") {
			continue
		}
		a, b, ok := strings.Cut(l, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, badField(fmt.Sprintf("model.merges[%d]", len(pairs)), "%q is not two tokens separated by one space", l)
		}
		pairs = append(pairs, [2]string{a, b})
	}
	return pairs, nil
}

// tokenizeByteLevel appends the ids of word's byte-level form to dst,
// mapping it into *buf, which it reuses.
func (m *bpe) tokenizeByteLevel(dst []int32, word string, buf *[]byte) []int32 {
	b := (*buf)[:0]
	for i := 0; i < len(word); i++ {
		b = append(b, byteChar[word[i]]...)
	}
	*buf = b
	if len(b) == 0 {
		return dst
	}
	// Map lookups with string(b) do not copy b.
	if m.ignoreMerges {
		if id, ok := m.vocab[string(b)]; ok {
			return append(dst, id)
		}
	}
	if len(b) <= cacheMaxWord {
		m.cacheMu.RLock()
		ids, ok := m.cache[string(b)]
		m.cacheMu.RUnlock()
		if ok {
			return append(dst, ids...)
		}
	}
	return m.tokenize(dst, string(b))
}

// tokenize appends the ids of word to dst.
func (m *bpe) tokenize(dst []int32, word string) []int32 {
	if word == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) <= cacheMaxWord {
		m.cacheMu.RLock()
		ids, ok := m.cache[word]
		m.cacheMu.RUnlock()
		if ok {
			return append(dst, ids...)
		}
	}
	n := len(dst)
	dst = m.merge(dst, word)
	if len(word) <= cacheMaxWord {
		ids := append([]int32(nil), dst[n:]...)
		m.cacheMu.Lock()
		if len(m.cache) < cacheCapacity {
			m.cache[word] = ids
		}
		m.cacheMu.Unlock()
	}
	return dst
}

type symbol struct {
	id         int32
	prev, next int32
	alive      bool
}

type mergeCand struct{ rank, pos, id int32 }

// mergeHeap is a binary min-heap on (rank, pos): the best merge first,
// the leftmost among equals, as in the Rust library.
type mergeHeap []mergeCand

func (h mergeHeap) less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].pos < h[j].pos
}

func (h *mergeHeap) push(c mergeCand) {
	*h = append(*h, c)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *mergeHeap) pop() mergeCand {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, s := 2*i+1, 2*i+2, i
		if l < len(q) && q.less(l, s) {
			s = l
		}
		if r < len(q) && q.less(r, s) {
			s = r
		}
		if s == i {
			break
		}
		q[i], q[s] = q[s], q[i]
		i = s
	}
	*h = q
	return top
}

// merge splits word into characters (bytes through byte fallback, or the
// unknown token) and applies the merges, best rank first.
func (m *bpe) merge(dst []int32, word string) []int32 {
	syms := make([]symbol, 0, len(word))
	add := func(id int32) {
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, alive: true})
	}
	unk, unkPending := int32(-1), false
	for i := 0; i < len(word); {
		_, size := utf8.DecodeRuneInString(word[i:])
		s := word[i : i+size]
		if (m.prefix != "" && i > 0) || (m.suffix != "" && i+size == len(word)) {
			if i > 0 {
				s = m.prefix + s
			}
			if i+size == len(word) {
				s += m.suffix
			}
		}
		i += size
		if id, ok := m.vocab[s]; ok {
			if unkPending {
				add(unk)
				unkPending = false
			}
			add(id)
			continue
		}
		if m.byteFallback {
			ok := true
			for k := 0; k < len(s); k++ {
				if m.byteIDs[s[k]] < 0 {
					ok = false
					break
				}
			}
			if ok {
				for k := 0; k < len(s); k++ {
					add(m.byteIDs[s[k]])
				}
				continue
			}
		}
		if m.unk >= 0 {
			if unkPending && !m.fuseUnk {
				add(unk)
			}
			unk, unkPending = m.unk, true
		}
		// With no unknown token the character is dropped, as in the Rust
		// library.
	}
	if unkPending {
		add(unk)
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1

	h := make(mergeHeap, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if r, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(mergeCand{r.rank, int32(i), r.id})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		cur := &syms[c.pos]
		if !cur.alive || cur.next < 0 {
			continue
		}
		right := &syms[cur.next]
		if r, ok := m.merges[pairKey(cur.id, right.id)]; !ok || r.id != c.id {
			continue // stale: one side was merged since
		}
		cur.id = c.id
		right.alive = false
		cur.next = right.next
		if cur.next >= 0 {
			syms[cur.next].prev = c.pos
		}
		if cur.prev >= 0 {
			if r, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(mergeCand{r.rank, cur.prev, r.id})
			}
		}
		if cur.next >= 0 {
			if r, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(mergeCand{r.rank, c.pos, r.id})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	return dst
}
