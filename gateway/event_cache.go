package gateway

import "sync"

// eventCache holds the JSON of recent job events. Every watcher of a job
// is sent the same event (a job's event with a given seq never changes),
// so a burst to a thousand watchers of a hundred jobs is encoded a hundred
// times, not a thousand. Bounded: the oldest entry goes first.
type eventCache struct {
	mu   sync.Mutex
	m    map[string][]byte
	ring []string // insertion order, for eviction
	next int
}

func newEventCache(capacity int) *eventCache {
	return &eventCache{m: make(map[string][]byte, capacity), ring: make([]string, capacity)}
}

// get returns the cached JSON of key, or encodes it with encode and keeps
// it. Two callers missing at once both encode; the bytes are the same.
func (c *eventCache) get(key string, encode func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	b, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok {
		delete(c.m, c.ring[c.next])
		c.ring[c.next] = key
		c.next = (c.next + 1) % len(c.ring)
		c.m[key] = b
	}
	return b, nil
}
