package miopen

import (
	"container/list"
	"sync"
)

// defaultCacheSize is how many problems a handle remembers the Find of.
const defaultCacheSize = 256

// findCache remembers Find results by problem, least recently used out
// first. Goroutines that ask for a problem whose Find is running wait for
// it instead of running their own.
type findCache struct {
	mu       sync.Mutex
	cap      int
	entries  map[string]*list.Element // of *findEntry
	lru      *list.List
	hits     int
	misses   int
	diskHits int
}

type findEntry struct {
	key   string
	done  chan struct{}
	perfs []ConvAlgoPerf
	err   error
}

func newFindCache(capacity int) *findCache {
	return &findCache{cap: capacity, entries: map[string]*list.Element{}, lru: list.New()}
}

// get returns the results for key, running find when there are none (or
// when fresh is set). A failed Find is not remembered.
func (c *findCache) get(key string, fresh bool, find func() ([]ConvAlgoPerf, error)) ([]ConvAlgoPerf, error) {
	c.mu.Lock()
	if el, ok := c.entries[key]; ok && !fresh {
		e := el.Value.(*findEntry)
		c.lru.MoveToFront(el)
		c.hits++
		c.mu.Unlock()
		<-e.done
		if e.err != nil {
			return nil, e.err
		}
		return clonePerfs(e.perfs), nil
	}
	e := &findEntry{key: key, done: make(chan struct{})}
	if el, ok := c.entries[key]; ok {
		c.lru.Remove(el)
	}
	c.entries[key] = c.lru.PushFront(e)
	c.misses++
	for c.lru.Len() > c.cap {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*findEntry).key)
	}
	c.mu.Unlock()

	e.perfs, e.err = find()
	close(e.done)
	if e.err != nil {
		c.mu.Lock()
		if el, ok := c.entries[key]; ok && el.Value.(*findEntry) == e {
			c.lru.Remove(el)
			delete(c.entries, key)
		}
		c.mu.Unlock()
		return nil, e.err
	}
	return clonePerfs(e.perfs), nil
}

func clonePerfs(p []ConvAlgoPerf) []ConvAlgoPerf { return append([]ConvAlgoPerf(nil), p...) }

// forgetDisk forgets the results of key when they were read from disk, and
// says whether the handle holds others: those of a Find it ran, or one
// that is running.
func (c *findCache) forgetDisk(key string) (fresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return false
	}
	e := el.Value.(*findEntry)
	select {
	case <-e.done:
	default:
		return true
	}
	if e.err == nil && len(e.perfs) > 0 && !e.perfs[0].disk {
		return true
	}
	c.lru.Remove(el)
	delete(c.entries, key)
	return false
}

// countDiskHit counts a miss answered from the disk cache.
func (c *findCache) countDiskHit() {
	c.mu.Lock()
	c.diskHits++
	c.mu.Unlock()
}

// CacheStats counts a handle's Find cache: the problems it holds, how
// often a Find was answered from it (Hits) or not (Misses), and how many
// of the misses the disk cache answered without a Find (DiskHits; see
// FindCacheDir).
type CacheStats struct {
	Entries, Hits, Misses, DiskHits int
}

// FindCacheStats reports the handle's Find cache.
func (h *Handle) FindCacheStats() CacheStats {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: c.lru.Len(), Hits: c.hits, Misses: c.misses, DiskHits: c.diskHits}
}

// ClearFindCache forgets every Find result of the handle.
func (h *Handle) ClearFindCache() {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*list.Element{}
	c.lru.Init()
}
