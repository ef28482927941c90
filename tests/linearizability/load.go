package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Load is a set of clients that submit and read jobs over few keys, so that
// calls on one key overlap, repeat within the window, reuse a key with
// another request, and come back after the window.
type Load struct {
	// Clients run concurrently; default 6.
	Clients int
	// Keys are shared by all clients; default 12. Few keys, many calls.
	Keys int
	// Prefix makes the keys and documents of one run unique.
	Prefix string
	// CallTimeout bounds each call; default 2s.
	CallTimeout time.Duration
	// Pause between a client's calls; default 20ms. After a failed call a
	// client waits 5x as long.
	Pause time.Duration
}

func (l Load) withDefaults() Load {
	if l.Clients <= 0 {
		l.Clients = 6
	}
	if l.Keys <= 0 {
		l.Keys = 12
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = 2 * time.Second
	}
	if l.Pause <= 0 {
		l.Pause = 20 * time.Millisecond
	}
	return l
}

// Errors counts the errors the calls were answered with, by code; the
// caller decides which an outage allows.
type Errors struct {
	mu     sync.Mutex
	ByCode map[codes.Code]int
	// Samples keeps one error per code.
	Samples map[codes.Code]error
}

func (e *Errors) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := status.Code(err)
	e.ByCode[c]++
	if _, ok := e.Samples[c]; !ok {
		e.Samples[c] = err
	}
}

// Run runs the clients against client until ctx is done, recording every
// call in h, and returns the errors they saw.
func (l Load) Run(ctx context.Context, client oncejobv1.JobServiceClient, h *History) *Errors {
	l = l.withDefaults()
	errs := &Errors{ByCode: map[codes.Code]int{}, Samples: map[codes.Code]error{}}
	known := &knownJobs{byKey: map[string][]string{}}
	var wg sync.WaitGroup
	for c := range l.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				key := fmt.Sprintf("%s-key-%d", l.Prefix, rng.IntN(l.Keys))
				var out Output
				if ids := known.get(key); len(ids) > 0 && rng.IntN(4) == 0 {
					out = l.get(client, h, c, key, ids[rng.IntN(len(ids))], errs)
				} else {
					// Mostly the key's first request; sometimes another one,
					// which the key refuses within its window.
					request := "doc-a"
					if rng.IntN(6) == 0 {
						request = "doc-b"
					}
					out = l.submit(client, h, c, key, request, errs)
					if out.JobID != "" {
						known.add(key, out.JobID)
					}
				}
				pause := l.Pause
				if out.Outcome == Failed {
					pause *= 5
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func (l Load) submit(client oncejobv1.JobServiceClient, h *History, c int, key, request string, errs *Errors) Output {
	return h.Record(c, Input{Op: Submit, Key: key, Request: request}, func() Output {
		ctx, cancel := context.WithTimeout(context.Background(), l.CallTimeout)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
		resp, err := client.SubmitJob(ctx, &oncejobv1.SubmitJobRequest{
			Pipeline: "summarize",
			Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("%s %s: the document", key, request)}},
		})
		switch {
		case err == nil && resp.GetOutcome() == oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING:
			return Output{Outcome: Existing, JobID: resp.GetJob().GetId()}
		case err == nil:
			return Output{Outcome: Created, JobID: resp.GetJob().GetId()}
		case reused(err):
			return Output{Outcome: Reused}
		}
		errs.add(err)
		return Output{Outcome: Failed}
	})
}

func (l Load) get(client oncejobv1.JobServiceClient, h *History, c int, key, id string, errs *Errors) Output {
	return h.Record(c, Input{Op: Get, Key: key, JobID: id}, func() Output {
		ctx, cancel := context.WithTimeout(context.Background(), l.CallTimeout)
		defer cancel()
		resp, err := client.GetJob(ctx, &oncejobv1.GetJobRequest{JobId: id})
		switch {
		case err == nil:
			return Output{Outcome: Found, JobKey: resp.GetJob().GetIdempotencyKey()}
		case status.Code(err) == codes.NotFound:
			return Output{Outcome: NotFound}
		}
		errs.add(err)
		return Output{Outcome: Failed}
	})
}

func reused(err error) bool {
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "IDEMPOTENCY_KEY_REUSED" {
			return true
		}
	}
	return false
}

// knownJobs are the job ids answered per key, which GetJob reads back.
type knownJobs struct {
	mu    sync.Mutex
	byKey map[string][]string
}

func (k *knownJobs) add(key, id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, known := range k.byKey[key] {
		if known == id {
			return
		}
	}
	k.byKey[key] = append(k.byKey[key], id)
}

func (k *knownJobs) get(key string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.byKey[key]...)
}
