package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
)

// standbyReads is the API's store with the reads that may be stale - the
// page and head of ListJobs (the console's lists) and CountJobs - served by
// a standby (--read-database-url). Everything else stays on the primary:
// the idempotency check, GetJob, watches, and the engine and the relay,
// which never see this store. docs/operations.md, "Failover".
type standbyReads struct {
	appStore
	standby *storepg.Store
}

// withStandbyReads returns st itself when url is empty, else st (on
// Postgres: onPostgres) with its stale-tolerant reads on a pool of url;
// close closes that pool.
func withStandbyReads(ctx context.Context, st appStore, onPostgres bool, url string) (appStore, func(), error) {
	if url == "" {
		return st, func() {}, nil
	}
	if !onPostgres {
		return nil, nil, errors.New("--read-database-url needs --database-url (Postgres)")
	}
	standby, err := storepg.Open(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("open --read-database-url: %w", err)
	}
	return standbyReads{appStore: st, standby: standby}, standby.Close, nil
}

// JobList implements store.Store on the standby.
func (s standbyReads) JobList(ctx context.Context, params *store.JobListParams) (*store.JobListResult, error) {
	return s.standby.JobList(ctx, params)
}

// JobCountByStatus implements store.ViewStore on the standby.
func (s standbyReads) JobCountByStatus(ctx context.Context, params *store.JobCountByStatusParams) (map[store.JobStatus]int64, error) {
	return s.standby.JobCountByStatus(ctx, params)
}

// JobChangeHead implements store.ViewStore on the standby: the head must
// come from the server the page is read from, so that a watch from it
// starts no later than the page's (possibly stale) view.
func (s standbyReads) JobChangeHead(ctx context.Context, params *store.JobChangeHeadParams) (store.JobChangeCursor, error) {
	return s.standby.JobChangeHead(ctx, params)
}
