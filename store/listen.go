package store

import (
	"context"
	"log/slog"
	"time"
)

// Defaults of JobEventListenParams.
const (
	JobEventListenPollIntervalDefault = time.Second
	JobEventListenBufferDefault       = 1024
)

// WithDefaults returns p with zero fields set to their defaults.
func (p JobEventListenParams) WithDefaults() JobEventListenParams {
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.PollInterval <= 0 {
		p.PollInterval = JobEventListenPollIntervalDefault
	}
	if p.Buffer <= 0 {
		p.Buffer = JobEventListenBufferDefault
	}
	return p
}

// RunTail is the loop of a notification source's tail of the log, the same
// in every store: it calls tail after each wake-up and every
// p.PollInterval until ctx is done, and logs once when tail starts failing
// and once when it recovers (a database that is down would otherwise fill
// the log every interval). tail reads the log after the source's own
// cursor and notifies what it finds; a failed tail is simply tried again.
func RunTail(ctx context.Context, p JobEventListenParams, wake <-chan struct{}, tail func(context.Context) error) {
	ticker := time.NewTicker(p.PollInterval)
	defer ticker.Stop()
	failing := false
	for {
		select {
		case <-wake:
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
		err := tail(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			p.Logger.WarnContext(ctx, "job event tail failed; retrying every poll interval", "error", err)
		case err == nil && failing:
			p.Logger.InfoContext(ctx, "job event tail recovered")
		}
		failing = err != nil
	}
}
