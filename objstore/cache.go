package objstore

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// lru is a byte-bounded least-recently-used cache of immutable byte slices.
// Safe for concurrent use. Values are shared: callers must not modify them.
//
// A value is charged its capacity, not its length: what it keeps from
// the garbage collector is its whole backing array. A text rebuilt into a
// recycled read buffer (getBuf) may sit in an array several times its
// length, and charged by length the fulltext cache of a mount held 81 MB
// against its 64 MiB budget (F1, bench/footprint.go).
type lru[K comparable] struct {
	mu      sync.Mutex
	keepOne bool // keep the newest value even if it alone exceeds the budget
	budget  int64
	used    int64         // sum of the values' capacities
	uses    atomic.Uint64 // gets and adds, for an owner that watches for idleness
	order   *list.List    // front = most recent; elements hold *lruItem[K]
	items   map[K]*list.Element
}

type lruItem[K comparable] struct {
	key K
	val []byte
}

func newLRU[K comparable](budget int64) *lru[K] {
	return &lru[K]{budget: budget, order: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K]) get(k K) ([]byte, bool) {
	c.uses.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruItem[K]).val, true
}

// add inserts or replaces k. A value larger than the whole budget is not
// cached (it would evict everything and then itself), unless keepOne is set:
// then it evicts everything else and stays alone.
//
// It reports whether v was cached: if not, no other caller can have got v
// from c.
func (c *lru[K]) add(k K, v []byte) bool {
	c.uses.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(k)
	if int64(cap(v)) > c.budget && !c.keepOne {
		return false
	}
	c.items[k] = c.order.PushFront(&lruItem[K]{key: k, val: v})
	c.used += int64(cap(v))
	for c.used > c.budget && c.order.Len() > 1 {
		c.removeLocked(c.order.Back().Value.(*lruItem[K]).key)
	}
	return true
}

func (c *lru[K]) remove(k K) {
	c.uses.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(k)
}

func (c *lru[K]) removeLocked(k K) {
	el, ok := c.items[k]
	if !ok {
		return
	}
	c.used -= int64(cap(el.Value.(*lruItem[K]).val))
	c.order.Remove(el)
	delete(c.items, k)
}

// size returns the bytes held and the number of entries.
func (c *lru[K]) size() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.items)
}

// clear drops every entry and returns the bytes they were charged.
func (c *lru[K]) clear() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	used := c.used
	c.order.Init()
	clear(c.items)
	c.used = 0
	return used
}
