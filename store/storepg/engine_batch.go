package storepg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// The batched engine (docs/architecture.md, "The batched engine"): each
// method is one statement that carries what several of engine.go's did,
// with the same fence per job.

// JobClaimWork implements store.EngineStore: the claim's one statement and
// one read of the claimed jobs' documents.
func (s *Store) JobClaimWork(ctx context.Context, params *store.JobClaimParams) ([]*store.JobWork, error) {
	jobs, err := s.JobClaim(ctx, params)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	args := dbsqlc.DocumentGetManyParams{Tenants: make([]string, len(jobs)), Sha256s: make([]string, len(jobs))}
	for i, j := range jobs {
		args.Tenants[i], args.Sha256s[i] = j.Tenant, j.DocumentSHA256
	}
	docs, err := s.q.DocumentGetMany(ctx, s.hot(ctx), args)
	if err != nil {
		// The jobs are claimed: their stages read the documents one by one.
		docs = nil
	}
	type docKey struct{ tenant, sha string }
	byKey := make(map[docKey][]byte, len(docs))
	for _, d := range docs {
		byKey[docKey{d.Tenant, d.Sha256}] = d.Data
	}
	work := make([]*store.JobWork, len(jobs))
	var again []string
	for i, j := range jobs {
		work[i] = &store.JobWork{Job: j, Document: byKey[docKey{j.Tenant, j.DocumentSHA256}], CheckpointsRead: j.Attempt <= 1}
		if j.Attempt > 1 {
			if id, err := parseUUID(j.ID); err == nil {
				again = append(again, id)
			}
		}
	}
	if len(again) > 0 {
		rows, err := s.q.CheckpointListMany(ctx, s.hot(ctx), again)
		if err != nil {
			return work, nil // the jobs read their checkpoints themselves
		}
		byJob := map[string][]*store.Checkpoint{}
		for _, row := range rows {
			cp := checkpointFromRow(row)
			byJob[cp.JobID] = append(byJob[cp.JobID], cp)
		}
		for _, w := range work {
			if w.Job.Attempt > 1 {
				w.Checkpoints, w.CheckpointsRead = store.CheckpointsInOrder(byJob[w.Job.ID]), true
			}
		}
	}
	return work, nil
}

// CheckpointGetByStageKeys implements store.EngineStore.
func (s *Store) CheckpointGetByStageKeys(ctx context.Context, params *store.CheckpointGetByStageKeysParams) (*store.CheckpointGetByStageKeysResult, error) {
	res := &store.CheckpointGetByStageKeysResult{Checkpoints: map[string]*store.Checkpoint{}}
	if len(params.StageKeys) == 0 && params.DedupKey == "" {
		return res, nil
	}
	var rows []dbsqlc.CheckpointGetByStageKeysRow
	var err error
	if len(params.StageKeys) == 1 {
		// One key (a one-chunk job's call): the statement whose generic plan
		// Postgres keeps (engine_batch.sql).
		var one []dbsqlc.CheckpointGetByOneStageKeyRow
		one, err = s.q.CheckpointGetByOneStageKey(ctx, s.hot(ctx), dbsqlc.CheckpointGetByOneStageKeyParams{
			Tenant: params.Tenant, StageKey: params.StageKeys[0], DedupKey: params.DedupKey,
		})
		for _, row := range one {
			rows = append(rows, dbsqlc.CheckpointGetByStageKeysRow(row))
		}
	} else {
		rows, err = s.q.CheckpointGetByStageKeys(ctx, s.hot(ctx), dbsqlc.CheckpointGetByStageKeysParams{
			Tenant: params.Tenant, StageKeys: nonNilSlice(params.StageKeys), DedupKey: params.DedupKey,
		})
	}
	if err != nil {
		return nil, interpretError(err)
	}
	for _, row := range rows {
		if row.StageKey == "" { // the computed success of the dedup key
			res.ComputedBy = row.JobID
			continue
		}
		res.Checkpoints[row.StageKey] = &store.Checkpoint{
			JobID:       row.JobID,
			Tenant:      params.Tenant,
			Stage:       store.JobStage(row.Stage),
			Chunk:       int32(row.Chunk),
			StageKey:    row.StageKey,
			CodeVersion: row.CodeVersion,
			Attempt:     int32(row.Attempt),
			Output:      row.Output,
			ReusedFrom:  row.ReusedFrom,
			CreatedAt:   row.CreatedAt,
		}
	}
	return res, nil
}

// JobHeartbeatMany implements store.EngineStore.
func (s *Store) JobHeartbeatMany(ctx context.Context, params *store.JobHeartbeatManyParams) (*store.JobHeartbeatManyResult, error) {
	res := &store.JobHeartbeatManyResult{}
	args := dbsqlc.JobHeartbeatManyParams{Now: params.Now, LeaseDuration: interval(params.LeaseDuration)}
	held := make(map[string]store.Lease, len(params.Leases))
	for _, l := range byJobID(params.Leases, func(l store.Lease) string { return l.JobID }) {
		id, err := parseUUID(l.JobID)
		if err != nil {
			res.Lost = append(res.Lost, l)
			continue
		}
		held[id] = l
		args.Ids = append(args.Ids, id)
		args.Owners = append(args.Owners, l.Owner)
		args.Attempts = append(args.Attempts, int64(l.Attempt))
	}
	if len(args.Ids) == 0 {
		return res, nil
	}
	rows, err := s.q.JobHeartbeatMany(ctx, s.hot(ctx), args)
	if err != nil {
		return nil, interpretError(err)
	}
	for _, row := range rows {
		if row.CancelRequested {
			res.CancelRequested = append(res.CancelRequested, row.ID)
		}
		delete(held, row.ID)
	}
	for _, l := range params.Leases {
		if id, err := parseUUID(l.JobID); err == nil {
			if _, lost := held[id]; lost {
				res.Lost = append(res.Lost, l)
			}
		}
	}
	return res, nil
}

// checkpointRecord is one checkpoint of a batch, as the statements'
// jsonb_to_recordset reads it; Output is base64 (encoding/json's []byte).
type checkpointRecord struct {
	JobID       string `json:"job_id,omitempty"`
	Stage       string `json:"stage"`
	Chunk       int32  `json:"chunk"`
	StageKey    string `json:"stage_key"`
	CodeVersion string `json:"code_version"`
	Output      []byte `json:"output"`
	ReusedFrom  string `json:"reused_from"`
	EventOffset int    `json:"event_offset"`
	EventsAfter int    `json:"events_after"`
	Message     string `json:"message"`
}

// checkpointRecords lays out cps for a statement: the events of the
// advancing ones numbered 1..advances in order.
func checkpointRecords(jobID string, cps []store.StageCheckpoint) (records []checkpointRecord, advances int, advanceTo *string) {
	for _, cp := range cps {
		if cp.AdvanceStage {
			advances++
		}
	}
	n := 0
	for _, cp := range cps {
		r := checkpointRecord{
			JobID: jobID, Stage: string(cp.Stage), Chunk: cp.Chunk, StageKey: cp.StageKey,
			CodeVersion: cp.CodeVersion, Output: rowmap.NonNilSlice(cp.Output), ReusedFrom: cp.ReusedFrom, Message: cp.Message,
		}
		if cp.AdvanceStage {
			n++
			r.EventOffset, r.EventsAfter = n, advances-n
			advanceTo = new(string(cp.Stage))
		}
		records = append(records, r)
	}
	return records, advances, advanceTo
}

// CheckpointWriteMany implements store.EngineStore.
func (s *Store) CheckpointWriteMany(ctx context.Context, params *store.CheckpointWriteManyParams) error {
	id, err := parseUUID(params.Lease.JobID)
	if err != nil {
		return store.ErrLeaseLost
	}
	records, advances, advanceTo := checkpointRecords("", params.Checkpoints)
	if advanceTo == nil && params.Stage != "" {
		advanceTo = new(string(params.Stage))
	}
	cps, err := json.Marshal(nonNilSlice(records))
	if err != nil {
		return fmt.Errorf("storepg: checkpoints: %w", err)
	}
	args := dbsqlc.CheckpointWriteManyParams{
		Checkpoints: string(cps),
		JobID:       id,
		Owner:       params.Lease.Owner,
		Attempt:     int64(params.Lease.Attempt),
		AdvanceTo:   advanceTo,
		Advances:    int64(advances),
	}
	if a := params.Attempt; a != nil {
		args.RecordAttempt = true
		args.JobAttempt, args.AttemptStage, args.AttemptChunk = int64(a.JobAttempt), string(a.Stage), int64(a.Chunk)
		args.ProviderKey, args.Outcome, args.Billed = a.ProviderKey, string(a.Outcome), a.Billed
		args.ProviderRequestID, args.PromptTokens, args.CompletionTokens = a.ProviderRequestID, a.PromptTokens, a.CompletionTokens
		args.CostMicros, args.LatencyMs, args.Error, args.Model = a.CostMicros, a.LatencyMillis, a.Error, a.Model
		args.PriceClass = string(a.PriceClass.Or())
	}
	row, err := s.q.CheckpointWriteMany(ctx, s.hot(ctx), args)
	if isBilledOnceViolation(err) {
		// A concurrent attempt counted this bill first (LLMAttemptRecord).
		args.Billed = false
		row, err = s.q.CheckpointWriteMany(ctx, s.hot(ctx), args)
	}
	switch {
	case err != nil:
		return interpretError(err)
	case params.Attempt != nil && row.Journaled == 0:
		return store.ErrNotFound
	case !row.Fenced:
		return store.ErrLeaseLost
	}
	if advances > 0 {
		s.eventCommitted(row.Tenant, id, row.LastEventSeq)
	}
	return nil
}

// publishRecord is one job of a JobPublishMany statement.
type publishRecord struct {
	JobID    string          `json:"job_id"`
	Owner    string          `json:"owner"`
	Attempt  int32           `json:"attempt"`
	Output   json.RawMessage `json:"output,omitempty"`
	Message  string          `json:"message"`
	Advances int             `json:"advances"`
}

// JobPublishMany implements store.EngineStore. When the statement fails as
// a whole - two jobs of one dedup key in the batch, a concurrent publisher
// of a key, or any error but an unreachable store - each job is published
// alone, so that one job's refusal is its own.
func (s *Store) JobPublishMany(ctx context.Context, params *store.JobPublishManyParams) (*store.JobPublishManyResult, error) {
	items := make([]store.JobPublishItem, len(params.Jobs))
	var batch []int
	seen := make(map[string]bool, len(params.Jobs))
	for i, p := range params.Jobs {
		switch {
		case seen[p.Lease.JobID]:
			items[i].Err = fmt.Errorf("storepg: job %s twice in one publish batch: %w", p.Lease.JobID, store.ErrLeaseLost)
		case p.Output != nil && !json.Valid(p.Output):
			items[i].Err = fmt.Errorf("storepg: job %s: the output is not JSON", p.Lease.JobID)
		default:
			if _, err := parseUUID(p.Lease.JobID); err != nil {
				items[i].Err = store.ErrLeaseLost
				continue
			}
			seen[p.Lease.JobID] = true
			batch = append(batch, i)
		}
	}
	if len(batch) == 0 {
		return &store.JobPublishManyResult{Items: items}, nil
	}
	err := s.publishBatch(ctx, params.Jobs, batch, items)
	if err == nil {
		return &store.JobPublishManyResult{Items: items}, nil
	}
	if errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
		return nil, err
	}
	if len(batch) == 1 && !isComputedSuccessViolation(err) {
		items[batch[0]].Err = interpretError(err)
		return &store.JobPublishManyResult{Items: items}, nil
	}
	for _, i := range batch {
		err := s.publishBatch(ctx, params.Jobs, []int{i}, items)
		if isComputedSuccessViolation(err) {
			// The snapshot of a new statement sees the other publisher's
			// success: this job publishes as deduplicated.
			err = s.publishBatch(ctx, params.Jobs, []int{i}, items)
		}
		if errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
		if err != nil {
			items[i].Err = interpretError(err)
		}
	}
	return &store.JobPublishManyResult{Items: items}, nil
}

// publishBatch runs the JobPublishMany statement for jobs[batch] and fills
// their items; a job the fence left out is ErrLeaseLost. The error is the
// statement's, raw (isComputedSuccessViolation reads it), or ErrUnavailable.
func (s *Store) publishBatch(ctx context.Context, jobs []*store.JobPublishParams, batch []int, items []store.JobPublishItem) error {
	records := make([]publishRecord, 0, len(batch))
	var cps []checkpointRecord
	for _, i := range byJobID(batch, func(i int) string { return jobs[i].Lease.JobID }) {
		p := jobs[i]
		rs, advances, _ := checkpointRecords(p.Lease.JobID, p.Checkpoints)
		cps = append(cps, rs...)
		records = append(records, publishRecord{
			JobID: p.Lease.JobID, Owner: p.Lease.Owner, Attempt: p.Lease.Attempt,
			Output: json.RawMessage(p.Output), Message: p.Message, Advances: advances,
		})
	}
	jobsJSON, err := json.Marshal(records)
	if err != nil {
		return fmt.Errorf("storepg: publish batch: %w", err)
	}
	cpsJSON, err := json.Marshal(nonNilSlice(cps))
	if err != nil {
		return fmt.Errorf("storepg: publish batch: %w", err)
	}
	rows, err := s.q.JobPublishMany(ctx, s.hot(ctx), dbsqlc.JobPublishManyParams{Jobs: string(jobsJSON), Checkpoints: string(cpsJSON)})
	if err != nil {
		if ierr := interpretError(err); errors.Is(ierr, store.ErrUnavailable) {
			return ierr
		}
		return err
	}
	published := make(map[string]*store.Job, len(rows))
	for _, row := range rows {
		s.eventCommitted(row.Tenant, row.ID, row.LastEventSeq)
		job, err := jobFromRow(dbsqlc.Job(row))
		if err != nil {
			return err
		}
		published[job.ID] = job
	}
	if err := s.runs.Apply(ctx, slices.Collect(maps.Values(published))...); err != nil {
		return err
	}
	for _, i := range batch {
		if job, ok := published[jobs[i].Lease.JobID]; ok {
			items[i] = store.JobPublishItem{Job: job}
		} else {
			items[i] = store.JobPublishItem{Err: store.ErrLeaseLost}
		}
	}
	return nil
}

// byJobID returns s sorted by job id. The batched statements' plans (a
// nested loop over their input, probing jobs_pkey) lock the jobs' rows in
// input order, so two of them over the same jobs (a worker's heartbeat and
// its completer's publish) take the locks in one order. Should a plan not,
// Postgres's deadlock check ends one statement: a heartbeat is tried again
// at the next beat, a publish batch goes job by job.
func byJobID[T any](s []T, id func(T) string) []T {
	sorted := slices.Clone(s)
	slices.SortFunc(sorted, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	return sorted
}

// nonNilSlice makes a nil slice encode as [] rather than null.
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
