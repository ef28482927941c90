package limits

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/tenant"
)

// ReasonStoreCalls: a tenant's calls at once in the store.
const ReasonStoreCalls = "TENANT_STORE_CALLS"

// storeCallsWaiting bounds a tenant's calls waiting for one of its store
// slots, as a multiple of its share: past it a call is refused at once,
// so waiting calls pin no more than a bounded number of goroutines and
// requests.
const storeCallsWaiting = 4

// storeCallsWait bounds one call's wait for a slot, whatever its
// deadline.
const storeCallsWait = 10 * time.Second

// storeCallsRetry is the RetryInfo of a call refused a slot.
const storeCallsRetry = time.Second

// batchedMethods do not take a slot: SubmitJob waits in the group commit,
// whose one write serves every waiting submission with one connection,
// and its rate is the submit limits'.
var batchedMethods = map[string]bool{
	oncejobv1.JobService_SubmitJob_FullMethodName: true,
}

// storeSlots is one tenant's share of the store's connections: a slot is
// held for the whole of a unary call.
type storeSlots struct {
	slots   chan struct{}
	waiting int // guarded by Limits.mu
}

func (l *Limits) slotsOf(name string, n int) *storeSlots {
	s := l.stateOf(name, l.For(name))
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.store == nil {
		s.store = &storeSlots{slots: make(chan struct{}, n)}
	}
	return s.store
}

// acquireStoreSlot waits for one of tenant name's store slots and returns
// its release, or RESOURCE_EXHAUSTED TENANT_STORE_CALLS when too many of
// the tenant's calls wait already or the wait is over storeCallsWait. A
// call whose context ends while it waits gets the context's error.
func (l *Limits) acquireStoreSlot(ctx context.Context, name string, n int) (func(), error) {
	s := l.slotsOf(name, n)
	select {
	case s.slots <- struct{}{}:
		l.signals.StoreSlot.Signal(name)
		return func() { <-s.slots }, nil
	default:
	}
	l.mu.Lock()
	if s.waiting >= storeCallsWaiting*n {
		l.mu.Unlock()
		return nil, l.storeCallsExhausted(name, n)
	}
	s.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		s.waiting--
		l.mu.Unlock()
	}()
	l.signals.StoreSlotWait.Signal(name)
	timer := time.NewTimer(storeCallsWait)
	defer timer.Stop()
	select {
	case s.slots <- struct{}{}:
		l.signals.StoreSlot.Signal(name)
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, l.storeCallsExhausted(name, n)
	}
}

func (l *Limits) storeCallsExhausted(name string, n int) error {
	return exhausted(ReasonStoreCalls, storeCallsRetry, map[string]string{"limit": strconv.Itoa(n)},
		"tenant %s has %d calls in the job store at once on this server, its limit, and more waiting; retry shortly", name, n)
}

// StoreCallsInterceptor holds one of the tenant's store slots
// (Tenant.StoreCalls) for each unary call but SubmitJob, so one tenant's
// calls cannot take every connection of the store's pool and starve the
// others (docs/operations.md, "Limits"). It runs after authentication:
// the tenant is in the context.
func (l *Limits) StoreCallsInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		name, _ := tenant.FromContext(ctx)
		n := l.For(name).StoreCalls
		if n <= 0 || batchedMethods[info.FullMethod] {
			return handler(ctx, req)
		}
		release, err := l.acquireStoreSlot(ctx, name, n)
		if err != nil {
			return nil, err
		}
		defer release()
		return handler(ctx, req)
	}
}
