// Package membudget is the memory budget of one process: every path that
// holds request or response data for a while (a watch's batch and send
// buffer, the shared tail of a tenant's changes, a list page, a request
// body) draws the bytes it holds from one Budget and gives them back when
// done. A draw the budget cannot cover is refused at once with
// RESOURCE_EXHAUSTED (ErrorInfo reason MEMORY_BUDGET, a RetryInfo), so a
// process under hostile load answers with a status instead of being killed
// for memory (docs/operations.md, "Memory budget").
//
// The budget counts the bytes of the data as it is encoded (a row's
// columns, a message's wire size), not the heap it takes once decoded, so
// `serve` gives it a part of --memory-budget and leaves the rest to the Go
// runtime (see Split). A nil *Budget is unlimited: every method works on it.
package membudget

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ReasonMemoryBudget is the ErrorInfo reason of a refusal.
const ReasonMemoryBudget = "MEMORY_BUDGET"

// errorDomain is the ErrorInfo domain of the server's errors.
const errorDomain = "oncejob.dev"

// retryAfter is the RetryInfo of a refusal: what others hold is given back
// as their calls end, within about this.
const retryAfter = time.Second

// DefaultProcessBytes is the default of `serve --memory-budget`.
const DefaultProcessBytes = 1 << 30

// Budget counts bytes held against a limit. Safe for concurrent use.
type Budget struct {
	limit   int64
	used    atomic.Int64
	peak    atomic.Int64
	refused atomic.Int64
}

// New returns a budget of limit bytes; limit <= 0 is unlimited.
func New(limit int64) *Budget {
	return &Budget{limit: limit}
}

// Split divides a process's memory budget: the bytes held data may draw
// (a quarter: decoded data takes a few times its encoded size, and the
// runtime, its garbage and the drivers' buffers need the rest) and the Go
// runtime's soft memory limit (nine tenths), which makes the collector
// work harder before the process reaches its budget.
func Split(processBytes int64) (data, runtime int64) {
	return processBytes / 4, processBytes / 10 * 9
}

// Limit returns the budget's limit, 0 for unlimited.
func (b *Budget) Limit() int64 {
	if b == nil || b.limit <= 0 {
		return 0
	}
	return b.limit
}

// Used returns the bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Peak returns the most bytes held at once since the budget was made.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// Refused returns how many draws were refused.
func (b *Budget) Refused() int64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// TryAcquire draws n bytes if the budget holds them, and reports whether
// it did. n <= 0 always succeeds.
func (b *Budget) TryAcquire(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		used := b.used.Load()
		if b.limit > 0 && used+n > b.limit {
			b.refused.Add(1)
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			b.notePeak(used + n)
			return true
		}
	}
}

func (b *Budget) notePeak(v int64) {
	for {
		p := b.peak.Load()
		if v <= p || b.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// Release gives back n bytes drawn before.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.used.Add(-n)
}

// Acquire draws n bytes, or returns the refusal (Exhausted) naming what
// wanted them.
func (b *Budget) Acquire(what string, n int64) error {
	if b.TryAcquire(n) {
		return nil
	}
	return b.Exhausted(what, n)
}

// Exhausted is the status of a draw of n bytes for what that the budget
// refused: RESOURCE_EXHAUSTED with ErrorInfo MEMORY_BUDGET and RetryInfo.
func (b *Budget) Exhausted(what string, n int64) error {
	st, _ := status.Newf(codes.ResourceExhausted,
		"the server's memory budget cannot hold %s (%d bytes) now; retry shortly", what, n).WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonMemoryBudget, Domain: errorDomain, Metadata: map[string]string{
			"bytes": strconv.FormatInt(n, 10), "limit": strconv.FormatInt(b.Limit(), 10),
		}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)},
	)
	return st.Err()
}

// Hold is bytes drawn for one purpose, grown as data arrives and given
// back at once. Not safe for concurrent use.
type Hold struct {
	b    *Budget
	what string
	n    int64
}

// Hold returns an empty hold on b for what.
func (b *Budget) Hold(what string) *Hold { return &Hold{b: b, what: what} }

// Grow draws n more bytes, or returns the refusal and draws nothing.
func (h *Hold) Grow(n int64) error {
	if err := h.b.Acquire(h.what, n); err != nil {
		return err
	}
	h.n += max(n, 0)
	return nil
}

// Shrink gives back n of the bytes held (at most all of them).
func (h *Hold) Shrink(n int64) {
	n = min(max(n, 0), h.n)
	h.b.Release(n)
	h.n -= n
}

// Bytes returns the bytes held.
func (h *Hold) Bytes() int64 { return h.n }

// Release gives back every byte held; the hold can be grown again.
func (h *Hold) Release() { h.Shrink(h.n) }

// ParseBytes reads a size: a number of bytes, or one with a suffix KiB,
// MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000).
func ParseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			s, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB, GiB, KB, MB or GB)", s)
	}
	return n * mult, nil
}
