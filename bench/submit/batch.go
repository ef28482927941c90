package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
)

// The SubmitJobs load generator. ghz turns a JSON template into a dynamic
// message on every call, which for a 1,000-item batch costs the client more
// CPU than the server spends on it; this client writes the request's wire
// bytes directly and reads only the outcome of each result, so the machine's
// CPU goes to the server and Postgres. The bench module does not import the
// root module, so the field numbers of proto/oncejob/v1/job.proto are
// written here:
//
//	SubmitJobsRequest  { repeated SubmitJobsItem items = 1; }
//	SubmitJobsItem     { string idempotency_key = 1; SubmitJobRequest request = 2; }
//	SubmitJobRequest   { string pipeline = 1; Document document = 2; }
//	Document           { string text = 1; }
//	SubmitJobsResponse { repeated SubmitJobsResult results = 1; }
//	SubmitJobsResult   { Job job = 1; SubmitOutcome outcome = 2; google.rpc.Status error = 3; }
const submitJobsMethod = "/oncejob.v1.JobService/SubmitJobs"

// SubmitOutcome values.
const (
	outcomeCreated  = 1
	outcomeExisting = 2
)

// rawCodec sends and receives wire bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append((*(v.(*[]byte)))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// batchRequest is a SubmitJobs request of n items with keys
// <prefix>-<i> and, for each, a document of the filler with the key in
// front (so every item is new work).
func batchRequest(prefix, filler string, n int) []byte {
	var req []byte
	for i := range n {
		key := prefix + "-" + strconv.Itoa(i)
		var doc, sub, item []byte
		doc = protowire.AppendTag(doc, 1, protowire.BytesType)
		doc = protowire.AppendString(doc, key+" "+filler)
		sub = protowire.AppendTag(sub, 1, protowire.BytesType)
		sub = protowire.AppendString(sub, "summarize")
		sub = protowire.AppendTag(sub, 2, protowire.BytesType)
		sub = protowire.AppendBytes(sub, doc)
		item = protowire.AppendTag(item, 1, protowire.BytesType)
		item = protowire.AppendString(item, key)
		item = protowire.AppendTag(item, 2, protowire.BytesType)
		item = protowire.AppendBytes(item, sub)
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, item)
	}
	return req
}

// batchOutcomes counts the results of a SubmitJobsResponse by outcome, and
// those with an error.
func batchOutcomes(resp []byte) (created, existing, failed int, err error) {
	for len(resp) > 0 {
		num, typ, n := protowire.ConsumeTag(resp)
		if n < 0 {
			return 0, 0, 0, protowire.ParseError(n)
		}
		resp = resp[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, resp)
			if n < 0 {
				return 0, 0, 0, protowire.ParseError(n)
			}
			resp = resp[n:]
			continue
		}
		result, n := protowire.ConsumeBytes(resp)
		if n < 0 {
			return 0, 0, 0, protowire.ParseError(n)
		}
		resp = resp[n:]
		outcome, hasErr, err := resultOutcome(result)
		if err != nil {
			return 0, 0, 0, err
		}
		switch {
		case hasErr:
			failed++
		case outcome == outcomeCreated:
			created++
		case outcome == outcomeExisting:
			existing++
		default:
			return 0, 0, 0, fmt.Errorf("result with outcome %d", outcome)
		}
	}
	return created, existing, failed, nil
}

func resultOutcome(b []byte) (outcome uint64, hasErr bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false, protowire.ParseError(n)
			}
			outcome, b = v, b[n:]
			continue
		case num == 3:
			hasErr = true
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return outcome, hasErr, nil
}

// batchReport is what a batch phase did.
type batchReport struct {
	calls, items int
	elapsed      time.Duration
	latencies    []time.Duration
}

// runBatches calls SubmitJobs from conc goroutines for d, each call
// batchSize new items, and checks every item was CREATED. A request is
// built per call (appending bytes: a fraction of a millisecond).
func runBatches(ctx context.Context, addr string, conc, batchSize int, filler, prefix string, d time.Duration) (*batchReport, error) {
	conn, err := grpc.DialContext(ctx, addr, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()

	var (
		mu     sync.Mutex
		rep    = &batchReport{}
		failed atomic.Value
		next   atomic.Int64
	)
	callCtx := metadata.AppendToOutgoingContext(ctx, "x-bench", "submitjobs")
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && failed.Load() == nil {
				n := next.Add(1)
				req := batchRequest(fmt.Sprintf("%s-%d-%d", prefix, w, n), filler, batchSize)
				var resp []byte
				t0 := time.Now()
				if err := conn.Invoke(callCtx, submitJobsMethod, &req, &resp); err != nil {
					failed.Store(fmt.Errorf("SubmitJobs: %w", err))
					return
				}
				lat := time.Since(t0)
				created, _, bad, err := batchOutcomes(resp)
				if err == nil && (created != batchSize || bad != 0) {
					err = fmt.Errorf("SubmitJobs of %d new items: %d created, %d failed", batchSize, created, bad)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				mu.Lock()
				rep.calls++
				rep.items += created
				rep.latencies = append(rep.latencies, lat)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rep.elapsed = time.Since(start)
	if err, ok := failed.Load().(error); ok {
		return nil, err
	}
	if rep.calls == 0 {
		return nil, errors.New("no SubmitJobs call completed")
	}
	return rep, nil
}
