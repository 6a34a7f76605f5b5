package nn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
)

// prefixCache is a CPU cache of 8 pages of 4 tokens with prefix caching.
func prefixCache(t *testing.T, on bool) *PagedKVCache {
	t.Helper()
	c, err := NewPagedKVCache(candle.CPU(), candle.F32, PagedKVConfig{Layers: 1, Pages: 8, PageSize: 4, KVHeads: 1, HeadDim: 8, PrefixCaching: on})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// feed appends tokens to sequences in one committed step (the pages'
// contents do not matter to the bookkeeping).
func feed(t *testing.T, c *PagedKVCache, seqs []uint64, tokens ...[]int32) {
	t.Helper()
	s, err := c.Begin(seqs, tokens)
	require.NoError(t, err)
	s.Commit()
	require.NoError(t, s.Close())
}

func span(from, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(from + i)
	}
	return out
}

// refsZero asserts that no page is held, and every page is free or cached.
func refsZero(t *testing.T, c *PagedKVCache) {
	t.Helper()
	for p, r := range c.prefix.ref {
		assert.Zero(t, r, "page %d", p)
	}
	assert.Equal(t, c.cfg.Pages, c.FreePages())
	assert.Equal(t, c.cfg.Pages, len(c.free)+c.CachedPages())
}

func TestPrefixAttachAndRelease(t *testing.T) {
	c := prefixCache(t, true)
	prompt := span(0, 10)
	feed(t, c, []uint64{1}, prompt)
	assert.Equal(t, 5, c.FreePages())
	assert.Len(t, c.prefix.cached, 2, "the two full pages are keyed, the partial one is not")

	// The same prompt and more: both full pages.
	n, err := c.AttachPrefix(2, append(span(0, 10), 50, 51))
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	got, ok := c.Len(2)
	assert.True(t, ok)
	assert.Equal(t, 8, got)
	assert.Equal(t, c.seqs[1].pages[:2], c.seqs[2].pages)
	assert.Equal(t, 2, c.SharedPages())
	assert.Equal(t, 5, c.FreePages(), "attaching pages in use takes none")
	// Exactly two pages' worth: one token is left to forward, so one page.
	n, err = c.AttachPrefix(3, span(0, 8))
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	// Another first token: nothing cached, nothing held.
	n, err = c.AttachPrefix(4, span(1, 10))
	require.NoError(t, err)
	assert.Zero(t, n)
	_, ok = c.Len(4)
	assert.False(t, ok)
	// A prompt within the first page: nothing (a page is shared whole).
	n, err = c.AttachPrefix(4, span(0, 4))
	require.NoError(t, err)
	assert.Zero(t, n)

	// The continuation of 2 writes past its shared pages, into its own.
	feed(t, c, []uint64{2}, []int32{8, 9, 50, 51})
	assert.Equal(t, 4, c.FreePages())
	assert.NotContains(t, c.seqs[1].pages, c.seqs[2].pages[2])
	// 2's third page is now full and its key is 1's partial page's plus
	// more: a new key.
	assert.Len(t, c.prefix.cached, 3)

	// 1 goes while 2 and 3 still read its pages: they stay held.
	shared := c.seqs[1].pages[:2]
	c.Release(1)
	assert.Equal(t, []int32{2, 1}, []int32{c.prefix.ref[shared[0]], c.prefix.ref[shared[1]]})
	assert.Equal(t, 5, c.FreePages())
	assert.Zero(t, c.CachedPages())
	c.Release(2)
	c.Release(3)
	refsZero(t, c)
	assert.Equal(t, 3, c.CachedPages(), "the keyed pages stay cached")

	// Then a new sequence finds them all.
	n, err = c.AttachPrefix(5, append(span(0, 10), 50, 51, 7))
	require.NoError(t, err)
	assert.Equal(t, 12, n)
	assert.Zero(t, c.CachedPages())
	assert.Equal(t, 5, c.FreePages())
	c.Release(5)
	refsZero(t, c)
	q, h := c.PrefixStats()
	assert.Equal(t, int64(12+8+10+4+13), q)
	assert.Equal(t, int64(8+4+12), h)
}

func TestPrefixEviction(t *testing.T) {
	c := prefixCache(t, true)
	a, b := span(0, 8), span(100, 8)
	feed(t, c, []uint64{1, 2}, a, b)
	c.Release(1) // a's pages first: the least recent
	c.Release(2)
	assert.Equal(t, 4, c.CachedPages())
	assert.Equal(t, 8, c.FreePages())
	// Five pages: the four free, then the least recently released page
	// of a, its last.
	feed(t, c, []uint64{3}, span(200, 20))
	assert.Equal(t, 3, c.CachedPages())
	n, err := c.AttachPrefix(4, append(span(0, 8), 1))
	require.NoError(t, err)
	assert.Equal(t, 4, n, "a's first page is left")
	n, err = c.AttachPrefix(5, append(span(100, 8), 1))
	require.NoError(t, err)
	assert.Equal(t, 8, n, "b is whole")
	// A step that needs more than the free and cached pages fails whole.
	c.Release(4)
	assert.Equal(t, 1, c.CachedPages())
	_, err = c.Begin([]uint64{6}, [][]int32{span(300, 13)})
	require.ErrorIs(t, err, ErrCacheFull)
	assert.Equal(t, 1, c.CachedPages())
	// One that needs them all evicts every cached page, and a step that
	// fails gives them back free, unkeyed.
	s, err := c.Begin([]uint64{6}, [][]int32{span(300, 4)})
	require.NoError(t, err)
	assert.Zero(t, c.CachedPages())
	require.NoError(t, s.Close())
	assert.Equal(t, 1, c.FreePages())
	assert.Len(t, c.prefix.cached, 2+5, "b's pages and 3's, still held")
	c.Release(3)
	c.Release(5)
	refsZero(t, c)
	assert.Equal(t, 7, c.CachedPages())
}

func TestPrefixConcurrentSamePrompt(t *testing.T) {
	// Two sequences prefill the same prompt in one step: each writes its
	// own pages, one copy is keyed, the other stays private and is freed.
	c := prefixCache(t, true)
	p := span(0, 9)
	feed(t, c, []uint64{1, 2}, p, p)
	assert.Len(t, c.prefix.cached, 2)
	assert.Zero(t, c.SharedPages())
	n, err := c.AttachPrefix(3, p)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	assert.Equal(t, 2, c.SharedPages())
	for _, id := range []uint64{1, 2, 3} {
		c.Release(id)
	}
	refsZero(t, c)
	assert.Equal(t, 2, c.CachedPages())
}

func TestPrefixDecodeKeysPages(t *testing.T) {
	// Tokens added one at a time key their page once it fills.
	c := prefixCache(t, true)
	feed(t, c, []uint64{1}, []int32{5, 6, 7})
	assert.Empty(t, c.prefix.cached)
	feed(t, c, []uint64{1}, []int32{8})
	assert.Len(t, c.prefix.cached, 1)
	feed(t, c, []uint64{1}, []int32{9})
	n, err := c.AttachPrefix(2, []int32{5, 6, 7, 8, 9})
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	// The same page's tokens after another first page: another key.
	n, err = c.AttachPrefix(3, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9})
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestPrefixCachingOff(t *testing.T) {
	c := prefixCache(t, false)
	p := span(0, 9)
	feed(t, c, []uint64{1}, p)
	c.Release(1)
	n, err := c.AttachPrefix(2, p)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, c.CachedPages())
	assert.Equal(t, 8, c.FreePages())
	assert.Nil(t, c.prefix.cached)
}

func TestAttachPrefixErrors(t *testing.T) {
	c := prefixCache(t, true)
	feed(t, c, []uint64{1}, span(0, 9))
	_, err := c.AttachPrefix(1, span(0, 9))
	require.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "in the cache already")
	s, err := c.Begin([]uint64{2}, [][]int32{{1}})
	require.NoError(t, err)
	_, err = c.AttachPrefix(3, span(0, 9))
	require.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "a step is in flight")
	require.NoError(t, s.Close())
	require.NoError(t, c.Close())
	_, err = c.AttachPrefix(3, span(0, 9))
	require.ErrorIs(t, err, candle.ErrClosed)
	c.Release(1) // a closed cache: a no-op
}

func TestTruncate(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := prefixCache(t, on)
		feed(t, c, []uint64{1}, span(0, 14)) // 4 pages, 3 full
		require.NoError(t, c.Truncate(1, 14), "its length: nothing to do")
		require.NoError(t, c.Truncate(1, 6))
		n, _ := c.Len(1)
		assert.Equal(t, 6, n)
		assert.Len(t, c.seqs[1].pages, 2)
		assert.Equal(t, 6, c.FreePages(), "two pages back")
		// The next tokens go on from position 6, into the kept page.
		feed(t, c, []uint64{1}, []int32{50, 51, 52})
		assert.Len(t, c.seqs[1].pages, 3)
		if on {
			// Kept: page 0's key; page 1 was rewritten (6, 7 → 50, 51)
			// and keyed anew; the pages given back keep theirs.
			assert.Equal(t, []int32{0, 1, 2, 3, 4, 5, 50, 51, 52}, c.seqs[1].toks)
			got, err := c.AttachPrefix(2, append(span(0, 6), 50, 51, 52))
			require.NoError(t, err)
			assert.Equal(t, 8, got)
			got, err = c.AttachPrefix(3, span(0, 14))
			require.NoError(t, err)
			assert.Equal(t, 4, got, "the old page 1 was written again: the old page 2 after it is unreachable")
			// A shared page is read-only: no truncation inside it.
			err = c.Truncate(1, 7)
			require.ErrorIs(t, err, candle.ErrArgument)
			assert.ErrorContains(t, err, "is shared")
			require.NoError(t, c.Truncate(1, 8), "at its end: nothing of it is written again")
			c.Release(2)
			c.Release(3)
		}
		c.Release(1)
		refsZero(t, c)
		for _, bad := range []int{0, 20} {
			feed(t, c, []uint64{4}, span(0, 3))
			err := c.Truncate(4, bad)
			require.ErrorIs(t, err, candle.ErrArgument)
			assert.ErrorContains(t, err, "want 1 to 3")
			c.Release(4)
		}
		assert.ErrorContains(t, c.Truncate(9, 1), "not in the cache")
		require.NoError(t, c.Close())
		assert.ErrorIs(t, c.Truncate(1, 1), candle.ErrClosed)
	}
}

func TestWritableGuard(t *testing.T) {
	// Only whole pages are ever shared; were a sequence's partial last
	// page shared, its next step would be refused rather than write into
	// another sequence's keys and values.
	c := prefixCache(t, true)
	feed(t, c, []uint64{1}, span(0, 6))
	last := c.seqs[1].pages[1]
	c.prefix.ref[last]++ // as if another sequence held it
	_, err := c.Begin([]uint64{1}, [][]int32{{7}})
	require.ErrorIs(t, err, candle.ErrArgument)
	assert.ErrorContains(t, err, "which other sequences may read")
	in, err := c.NewDecodeInputs(1, 16)
	require.NoError(t, err)
	defer in.Close()
	_, err = c.BeginDecode([]uint64{1}, []int32{7}, in)
	assert.ErrorContains(t, err, "which other sequences may read")
	c.prefix.ref[last]--
	feed(t, c, []uint64{1}, []int32{7})
}
