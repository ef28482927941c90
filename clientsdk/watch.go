package clientsdk

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// WatchOption configures Watch and WatchJobs.
type WatchOption func(*watchOptions)

type watchOptions struct {
	afterSeq int32
	policy   *RetryPolicy
}

// AfterSeq starts a Watch after the event with this seq (default 0: from
// the first event).
func AfterSeq(seq int32) WatchOption { return func(o *watchOptions) { o.afterSeq = seq } }

// WithWatchRetryPolicy overrides the client's retry policy for reconnects:
// MaxAttempts counts consecutive failed connections with no event between.
func WithWatchRetryPolicy(p RetryPolicy) WatchOption {
	return func(o *watchOptions) { p = p.withDefaults(); o.policy = &p }
}

func (c *Client) watchOptions(opts []WatchOption) watchOptions {
	o := watchOptions{policy: &c.policy}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Watch iterates over a job's events in seq order, each exactly once, and
// ends after the job's terminal event (SUCCEEDED, FAILED, CANCELLED,
// DEAD_LETTERED).
//
// When the stream breaks — a lost connection, a proxy that cuts it, a
// replica that shuts down (UNAVAILABLE, SERVER_SHUTTING_DOWN) — Watch
// reconnects, to any replica the Client reaches, asking for the events
// after the last one it yielded; the server's log makes that exact. It
// waits per the retry policy between reconnects and gives up with a
// *BudgetError after MaxAttempts failed ones in a row. Any other error
// (ErrNotFound, the context's) is yielded once and ends the iteration.
func (c *Client) Watch(ctx context.Context, jobID string, opts ...WatchOption) iter.Seq2[*Event, error] {
	o := c.watchOptions(opts)
	return func(yield func(*Event, error) bool) {
		last := o.afterSeq
		err := reconnecting(ctx, *o.policy, func(ctx context.Context) (progress, stop bool, err error) {
			stream, err := c.svc.WatchJob(ctx, &oncejobv1.WatchJobRequest{JobId: jobID, AfterSeq: last})
			if err != nil {
				return false, false, err
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					return progress, false, err
				}
				e := resp.GetEvent()
				if e.GetSeq() <= last {
					continue // never sent by the server; cheap insurance
				}
				last, progress = e.GetSeq(), true
				if !yield(e, nil) {
					return true, true, nil
				}
			}
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// WatchJobs iterates over the changes of the caller's jobs that req
// selects, from req.AfterCursor on, each exactly once and in the server's
// global order; it never ends on its own (stop iterating, or cancel ctx).
// It resumes from the last cursor it yielded after a broken stream, like
// Watch.
func (c *Client) WatchJobs(ctx context.Context, req *oncejobv1.WatchJobsRequest, opts ...WatchOption) iter.Seq2[*Change, error] {
	o := c.watchOptions(opts)
	return func(yield func(*Change, error) bool) {
		cursor := req.GetAfterCursor()
		err := reconnecting(ctx, *o.policy, func(ctx context.Context) (progress, stop bool, err error) {
			stream, err := c.svc.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{Status: req.GetStatus(), Pipeline: req.GetPipeline(), AfterCursor: cursor})
			if err != nil {
				return false, false, err
			}
			for {
				ch, err := stream.Recv()
				if err != nil {
					return progress, false, err
				}
				cursor, progress = ch.GetCursor(), true
				if !yield(ch, nil) {
					return true, true, nil
				}
			}
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// Wait returns the job once it is terminal: SUCCEEDED, FAILED, CANCELLED or
// DEAD_LETTERED, with its output. A terminal status is not an error; the
// job's Status says which.
func (c *Client) Wait(ctx context.Context, jobID string, opts ...WatchOption) (*Job, error) {
	for _, err := range c.Watch(ctx, jobID, opts...) {
		if err != nil {
			return nil, err
		}
	}
	return c.Get(ctx, jobID)
}

// reconnecting runs stream attempts until one ends (io.EOF), the consumer
// stops, or an error is final: not resumable, the context's, or the
// MaxAttempts-th failure in a row with no item between. Each attempt gets a
// context of its own, cancelled when it returns, so an abandoned stream is
// released at once.
func reconnecting(ctx context.Context, p RetryPolicy, attempt func(ctx context.Context) (progress, stop bool, err error)) error {
	failures := 0
	for {
		actx, cancel := context.WithCancel(ctx)
		progress, stop, err := attempt(actx)
		cancel()
		switch {
		case stop || errors.Is(err, io.EOF):
			return nil
		case ctx.Err() != nil || !retryable(err):
			return decodeError(err, "")
		}
		if progress {
			failures = 0
		}
		failures++
		if failures >= p.MaxAttempts {
			return &BudgetError{Attempts: failures, Last: decodeError(err, "")}
		}
		timer := time.NewTimer(p.wait(failures, err))
		select {
		case <-ctx.Done():
			timer.Stop()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ctx.Err()
			}
			return &BudgetError{Attempts: failures, Last: decodeError(err, ""), Deadline: true}
		case <-timer.C:
		}
	}
}
