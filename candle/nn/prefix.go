package nn

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/rocm-go/rocm/candle"
)

// Automatic prefix caching (vLLM's): with PagedKVConfig.PrefixCaching set,
// each full page of a sequence gets a key, the SHA-256 of the key of the
// page before it and the page's own tokens, so that a key stands for every
// token from the sequence's start to the page's end. A keyed page is
// reference-counted: any sequence whose tokens begin the same way may hold
// it (AttachPrefix), read-only. When no sequence holds it any more it
// stays in the cache, evictable, and is taken back least recently used
// first when a step needs pages and none is free.
//
// Only full pages are keyed, and a sequence writes only at positions past
// its length, which lie in its partial last page or in pages it takes
// fresh: no step ever writes into a page that another sequence can read.

// pageKey identifies a full page by its tokens and all those before it.
type pageKey [sha256.Size]byte

// chainKey is the key of a full page of tokens after the page of key parent
// (the zero key before a sequence's first page).
func chainKey(parent pageKey, tokens []int32) pageKey {
	b := make([]byte, len(parent)+4*len(tokens))
	copy(b, parent[:])
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[len(parent)+4*i:], uint32(t))
	}
	return sha256.Sum256(b)
}

// prefixState is a cache's prefix caching: the keys of its full pages, how
// many sequences hold each page, and the evictable pages (keyed, held by
// none) in a list from the least recently released.
type prefixState struct {
	on     bool
	ref    []int32 // by page: the sequences that hold it
	keyed  []bool  // by page: keys[p] is its key, and cached[keys[p]] == p
	keys   []pageKey
	cached map[pageKey]int32
	// The evictable pages as a doubly linked list through prev and next
	// (sized pages + 1: the last entry is the list's head and tail).
	prev, next []int32
	evictable  int
	// AttachPrefix's tokens looked up and found, for a hit rate.
	queried, hit int64
}

func (ps *prefixState) init(pages int, on bool) {
	ps.on = on
	ps.ref = make([]int32, pages)
	if !on {
		return
	}
	ps.keyed = make([]bool, pages)
	ps.keys = make([]pageKey, pages)
	ps.cached = map[pageKey]int32{}
	ps.prev = make([]int32, pages+1)
	ps.next = make([]int32, pages+1)
	ps.prev[pages], ps.next[pages] = int32(pages), int32(pages)
}

// pushRecent appends an evictable page at the list's most recent end.
func (ps *prefixState) pushRecent(p int32) {
	h := int32(len(ps.prev) - 1)
	last := ps.prev[h]
	ps.next[last], ps.prev[p] = p, last
	ps.next[p], ps.prev[h] = h, p
	ps.evictable++
}

// unlink takes an evictable page off the list.
func (ps *prefixState) unlink(p int32) {
	ps.next[ps.prev[p]] = ps.next[p]
	ps.prev[ps.next[p]] = ps.prev[p]
	ps.evictable--
}

// available is how many pages a step may take: the free ones, then the
// evictable ones.
func (c *PagedKVCache) available() int { return len(c.free) + c.prefix.evictable }

// take removes k pages from the free stack, then from the evictable pages
// (their keys forgotten), the least recently released first; the caller
// has checked that k are available. The pages are held once each.
func (c *PagedKVCache) take(k int) []int32 {
	if k <= 0 {
		return nil
	}
	ps := &c.prefix
	out := make([]int32, 0, k)
	n := min(k, len(c.free))
	out = append(out, c.free[len(c.free)-n:]...)
	c.free = c.free[:len(c.free)-n]
	for len(out) < k {
		p := ps.next[len(ps.prev)-1]
		ps.unlink(p)
		delete(ps.cached, ps.keys[p])
		ps.keyed[p] = false
		out = append(out, p)
	}
	for _, p := range out {
		ps.ref[p] = 1
	}
	return out
}

// giveBack drops a hold on each page: a page no sequence holds any more
// stays evictable when it is keyed, else it is free. The pages go in
// reverse, so that of a sequence's pages its last are evicted first (its
// first pages begin more sequences).
func (c *PagedKVCache) giveBack(pages []int32) {
	ps := &c.prefix
	for i := len(pages) - 1; i >= 0; i-- {
		p := pages[i]
		if ps.ref[p]--; ps.ref[p] > 0 {
			continue
		}
		if ps.on && ps.keyed[p] {
			ps.pushRecent(p)
		} else {
			c.free = append(c.free, p)
		}
	}
}

// keyFull keys the pages that q's new tokens filled (prefix caching on):
// each becomes shareable, unless a page of the same key is cached already
// (then q keeps its own copy unkeyed, and the chain goes on the same).
func (c *PagedKVCache) keyFull(q *pagedSeq, tokens []int32) {
	ps := &c.prefix
	P := c.cfg.PageSize
	q.toks = append(q.toks, tokens...)
	for k := len(q.keys); k < q.n/P; k++ {
		key := chainKey(lastKey(q.keys), q.toks[k*P:(k+1)*P])
		if _, dup := ps.cached[key]; !dup {
			p := q.pages[k]
			ps.keys[p], ps.keyed[p] = key, true
			ps.cached[key] = p
		}
		q.keys = append(q.keys, key)
	}
}

// lastKey is the key of the last of a sequence's full pages, the zero key
// before the first.
func lastKey(keys []pageKey) pageKey {
	if len(keys) == 0 {
		return pageKey{}
	}
	return keys[len(keys)-1]
}

// writable checks that the page a sequence's next token goes into, when
// it is one the sequence holds (its length is not a whole number of
// pages), is the sequence's alone: only full pages are shared, so this
// always holds; the check keeps a broken invariant from corrupting the
// pages of other sequences.
func (c *PagedKVCache) writable(op string, id uint64, q *pagedSeq) error {
	P := c.cfg.PageSize
	if q.n%P == 0 {
		return nil
	}
	if p := q.pages[q.n/P]; c.prefix.ref[p] > 1 || (c.prefix.on && c.prefix.keyed[p]) {
		return pkg.Errorf(op, candle.ErrArgument, "sequence %d would write into page %d, which other sequences may read (%d hold it)", id, p, c.prefix.ref[p])
	}
	return nil
}

// AttachPrefix starts sequence seq with the cached pages that tokens (the
// sequence's prompt) begins with: the longest run of whole pages whose
// keys are cached, always leaving at least one token of tokens uncached
// (its logits are the next token's). It returns the tokens the sequence
// now holds, a multiple of the page size; the caller feeds the rest of
// tokens from there (Begin). With none found, or prefix caching off, it
// returns 0 and the cache does not hold seq. The sequence must be new.
func (c *PagedKVCache) AttachPrefix(seq uint64, tokens []int32) (int, error) {
	const op = "PagedKVCache.AttachPrefix"
	if c.closed {
		return 0, pkg.Errorf(op, candle.ErrClosed, "the cache is closed")
	}
	if c.step != nil {
		return 0, pkg.Errorf(op, candle.ErrArgument, "a step is in flight: Close it first")
	}
	if _, held := c.seqs[seq]; held {
		return 0, pkg.Errorf(op, candle.ErrArgument, "sequence %d is in the cache already: a prefix starts a new sequence", seq)
	}
	ps := &c.prefix
	if !ps.on {
		return 0, nil
	}
	P := c.cfg.PageSize
	q := &pagedSeq{}
	for (len(q.pages)+1)*P < len(tokens) {
		k := len(q.pages)
		key := chainKey(lastKey(q.keys), tokens[k*P:(k+1)*P])
		p, ok := ps.cached[key]
		if !ok {
			break
		}
		q.pages, q.keys = append(q.pages, p), append(q.keys, key)
	}
	ps.queried += int64(len(tokens))
	if len(q.pages) == 0 {
		return 0, nil
	}
	for _, p := range q.pages {
		if ps.ref[p] == 0 {
			ps.unlink(p)
		}
		ps.ref[p]++
	}
	q.n = len(q.pages) * P
	q.toks = append([]int32(nil), tokens[:q.n]...)
	ps.hit += int64(q.n)
	c.seqs[seq] = q
	return q.n, nil
}

// CachedPages is the number of pages no sequence holds that the cache
// keeps for their prefix (evictable: FreePages counts them).
func (c *PagedKVCache) CachedPages() int { return c.prefix.evictable }

// SharedPages is the number of pages more than one sequence holds.
func (c *PagedKVCache) SharedPages() int {
	n := 0
	for _, r := range c.prefix.ref {
		if r > 1 {
			n++
		}
	}
	return n
}

// PrefixStats are AttachPrefix's counts since the cache was made: the
// prompt tokens it looked up, and those it found cached (every call
// counts: a prompt looked up again counts again).
func (c *PagedKVCache) PrefixStats() (queried, hit int64) { return c.prefix.queried, c.prefix.hit }

// Truncate keeps the first n tokens of sequence seq, 1 ≤ n ≤ its length,
// and gives back the pages past them (a speculative step's rejected
// tokens): the next step writes from position n. A page that the kept
// tokens end inside of is written again, so it loses its key; it must not
// be shared (ErrArgument). A full page given back keeps its key: its keys
// and values are those of its tokens, whichever were kept.
func (c *PagedKVCache) Truncate(seq uint64, n int) error {
	const op = "PagedKVCache.Truncate"
	if c.closed {
		return pkg.Errorf(op, candle.ErrClosed, "the cache is closed")
	}
	if c.step != nil {
		return pkg.Errorf(op, candle.ErrArgument, "a step is in flight: Close it first")
	}
	q, ok := c.seqs[seq]
	if !ok {
		return pkg.Errorf(op, candle.ErrArgument, "sequence %d is not in the cache", seq)
	}
	if n < 1 || n > q.n {
		return pkg.Errorf(op, candle.ErrArgument, "keeping %d tokens of sequence %d's %d: want 1 to %d (Release forgets a sequence)", n, seq, q.n, q.n)
	}
	P := c.cfg.PageSize
	keep := (n + P - 1) / P
	last := q.pages[keep-1]
	ps := &c.prefix
	if n%P != 0 && ps.ref[last] > 1 {
		return pkg.Errorf(op, candle.ErrArgument, "sequence %d's page %d is shared: its first %d tokens end inside it, and it is read-only", seq, keep-1, n)
	}
	c.giveBack(q.pages[keep:])
	q.pages, q.n = q.pages[:keep], n
	if ps.on {
		if n%P != 0 && ps.keyed[last] {
			delete(ps.cached, ps.keys[last])
			ps.keyed[last] = false
		}
		q.keys, q.toks = q.keys[:n/P], q.toks[:n]
	}
	return nil
}
