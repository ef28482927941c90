package rundefaults

import (
	"container/list"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/oncejob/oncejob/store"
)

// Defaults are a run's params (the JSON text its store returns) and labels.
type Defaults struct {
	Params []byte
	Labels map[string]string
}

// empty reports whether the defaults change no job.
func (d Defaults) empty() bool {
	return emptyObject(d.Params) && len(d.Labels) == 0
}

// size is about what d holds in memory.
func (d Defaults) size() int64 {
	n := int64(len(d.Params)) + 64
	for k, v := range d.Labels {
		n += int64(len(k)+len(v)) + 32
	}
	return n
}

// Load reads the defaults of the runs ids; a run it does not find is left
// out of the map.
type Load func(ctx context.Context, ids []string) (map[string]Defaults, error)

// MaxCacheBytes bounds what a Cache holds: the defaults of the runs read
// last, about 64 runs at the largest params (256 KiB), thousands of small
// ones.
const MaxCacheBytes = 16 << 20

// Cache gives jobs their runs' defaults, keeping those of the runs read
// last. A run's params and labels never change once it is created, so an
// entry is never stale: a job of a run the cache holds costs no query.
type Cache struct {
	style Style
	load  Load

	mu      sync.Mutex
	entries map[string]*list.Element // of entry, front the newest
	order   list.List
	bytes   int64
}

type entry struct {
	id       string
	defaults Defaults
	// members are the params' members, parsed once; err is why they are
	// none (the merge then fails, naming the job).
	members []member
	err     error
}

func newEntry(id string, d Defaults) *entry {
	if d.empty() {
		d = Defaults{} // keeps no empty map or "{}" around
	}
	e := &entry{id: id, defaults: d}
	if !emptyObject(d.Params) {
		e.members, e.err = members(d.Params, nil)
	}
	return e
}

// New is an empty Cache that merges in style and reads runs with load.
func New(style Style, load Load) *Cache {
	return &Cache{style: style, load: load, entries: make(map[string]*list.Element)}
}

// Put keeps the defaults of run id (a store calls it with every run it
// reads, so SubmitJobs's own RunGet warms it for the items' jobs).
func (c *Cache) Put(id string, d Defaults) {
	if _, ok := c.get(id); ok {
		return
	}
	e := newEntry(id, d) // parsed outside the lock
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(e)
}

// put keeps e, unless the cache holds its run already.
func (c *Cache) put(e *entry) {
	if el, ok := c.entries[e.id]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[e.id] = c.order.PushFront(e)
	c.bytes += e.defaults.size()
	for c.bytes > MaxCacheBytes && c.order.Len() > 1 {
		last := c.order.Back()
		old := last.Value.(*entry)
		c.order.Remove(last)
		delete(c.entries, old.id)
		c.bytes -= old.defaults.size()
	}
}

// get is the entry of run id if the cache holds it.
func (c *Cache) get(id string) (*entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry), true
}

// Found are the defaults of the runs of some jobs, by run id.
type Found map[string]*entry

// Bytes is about what the defaults of j's run add to j as text (its
// params' and labels' JSON): what a store adds to the size of a job it
// reads before it bounds a page by bytes.
func (f Found) Bytes(j *store.Job) int64 {
	if j == nil || j.RunID == "" {
		return 0
	}
	e, ok := f[j.RunID]
	if !ok {
		return 0
	}
	d := e.defaults
	n := int64(len(d.Params))
	for k, v := range d.Labels {
		n += int64(len(k)+len(v)) + 6
	}
	return n
}

// Of is the defaults of the runs of jobs (those with RunID set): from the
// cache, and the runs it lacks read in one Load. Nil jobs are skipped.
func (c *Cache) Of(ctx context.Context, jobs ...*store.Job) (Found, error) {
	found := make(Found)
	var missing []string
	for _, j := range jobs {
		if j == nil || j.RunID == "" {
			continue
		}
		if _, ok := found[j.RunID]; ok {
			continue
		}
		if e, ok := c.get(j.RunID); ok {
			found[j.RunID] = e
		} else if !slices.Contains(missing, j.RunID) {
			missing = append(missing, j.RunID)
		}
	}
	if len(missing) == 0 {
		return found, nil
	}
	loaded, err := c.load(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, d := range loaded {
		found[id] = newEntry(id, d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range missing {
		if e, ok := found[id]; ok {
			c.put(e)
		}
	}
	return found, nil
}

// Apply gives each job of a run (RunID set) its run's params and labels
// under its own, as the job's row held them before the defaults were
// stored once: the rows written since hold the item's own, those written
// before hold the merged ones, and merging those again changes nothing.
// Nil jobs are skipped.
func (c *Cache) Apply(ctx context.Context, jobs ...*store.Job) error {
	found, err := c.Of(ctx, jobs...)
	if err != nil {
		return err
	}
	return c.MergeFound(found, jobs...)
}

// MergeFound is Apply with the defaults read (Of).
func (c *Cache) MergeFound(found Found, jobs ...*store.Job) error {
	for _, j := range jobs {
		if j == nil || j.RunID == "" {
			continue
		}
		if e, ok := found[j.RunID]; ok { // a run not found (none is deleted) leaves the job as read
			if err := c.merge(j, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// merge puts e's defaults under j's own params and labels.
func (c *Cache) merge(j *store.Job, e *entry) error {
	d := e.defaults
	params, err := mergeParsed(c.style, d.Params, e.members, j.Params)
	if e.err != nil {
		err = fmt.Errorf("run params: %w", e.err)
	}
	if err != nil {
		return fmt.Errorf("job %s of run %s: %w: %w", j.ID, j.RunID, store.ErrInvalidRow, err)
	}
	j.Params = params
	if len(d.Labels) > 0 {
		labels := maps.Clone(d.Labels)
		maps.Copy(labels, j.Labels)
		j.Labels = labels
	}
	return nil
}
