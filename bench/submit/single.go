package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
)

// The SubmitJob load generator, for the same reason as the SubmitJobs one
// (batch.go): ghz's templating and dynamic messages cost the 2-core machine
// a fifth of its CPU at these rates, which pgbench's C client does not. It
// sends the request's wire bytes and reads the outcome:
//
//	SubmitJobRequest  { string pipeline = 1; Document document = 2; }
//	SubmitJobResponse { Job job = 1; SubmitOutcome outcome = 2; }
const submitJobMethod = "/oncejob.v1.JobService/SubmitJob"

// singleRequest is a SubmitJob request for document text.
func singleRequest(text string) []byte {
	var doc, req []byte
	doc = protowire.AppendTag(doc, 1, protowire.BytesType)
	doc = protowire.AppendString(doc, text)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, "summarize")
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	req = protowire.AppendBytes(req, doc)
	return req
}

// singleReport is what a SubmitJob phase did.
type singleReport struct {
	count     int
	elapsed   time.Duration
	latencies []time.Duration
}

func (r *singleReport) rate() float64 { return float64(r.count) / r.elapsed.Seconds() }

func (r *singleReport) note() string {
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	p := func(q float64) time.Duration { return r.latencies[int(q*float64(len(r.latencies)-1))] }
	return fmt.Sprintf("p50 %s p99 %s", p(0.5).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond))
}

// runSingles calls SubmitJob from conc goroutines, on one connection, for
// d. key(n) is call n's idempotency key and text(n) its document; every
// answer must have outcome want.
func runSingles(ctx context.Context, addr string, conc int, d time.Duration, key, text func(n int64) string, want uint64) (*singleReport, error) {
	conn, err := grpc.DialContext(ctx, addr, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	var (
		mu     sync.Mutex
		rep    = &singleReport{}
		next   atomic.Int64
		failed atomic.Value
		wg     sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lats []time.Duration
			defer func() {
				mu.Lock()
				rep.count += len(lats)
				rep.latencies = append(rep.latencies, lats...)
				mu.Unlock()
			}()
			for time.Now().Before(deadline) && failed.Load() == nil {
				n := next.Add(1)
				req := singleRequest(text(n))
				var resp []byte
				callCtx := metadata.AppendToOutgoingContext(ctx, "idempotency-key", key(n))
				t0 := time.Now()
				if err := conn.Invoke(callCtx, submitJobMethod, &req, &resp); err != nil {
					failed.Store(fmt.Errorf("SubmitJob: %w", err))
					return
				}
				lats = append(lats, time.Since(t0))
				if got, _, err := resultOutcome(resp); err != nil || got != want {
					failed.Store(fmt.Errorf("SubmitJob: outcome %d, want %d (%v)", got, want, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	rep.elapsed = time.Since(start)
	if err, ok := failed.Load().(error); ok {
		return nil, err
	}
	if rep.count == 0 {
		return nil, fmt.Errorf("no SubmitJob call completed")
	}
	return rep, nil
}

// newKeyCalls are call n's key and document for the new-key phases: each
// new, each document different.
func newKeyCalls(prefix, filler string) (key, text func(int64) string) {
	key = func(n int64) string { return prefix + "-" + strconv.FormatInt(n, 10) }
	text = func(n int64) string { return key(n) + " " + filler }
	return key, text
}
