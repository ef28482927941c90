package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// The River same-work peer (issue 33): a River job doing what oncejob's
// light job does, written the way a River user writes it. Before the call,
// one transaction: an attempt-journal row and a "claimed" event. Then one
// chat completion over HTTP from oncejob's own simulator (`oncejob
// llm-sim`, the one the engine phases call), with an Idempotency-Key as
// oncejob sends. Then, in the transaction that completes the job with
// river.JobCompleteTx: the journal's answer (an update of its row), the
// call's checkpoint, the result, an outbox row with the event's envelope
// and a "published" event. With River's own fetch and completion updates
// of river_job: 9 rows in 2 commits of the worker's.

// sameArgs is the same-work job: a document, as the light job's.
type sameArgs struct {
	Num      int    `json:"num"`
	Document string `json:"document"`
}

func (sameArgs) Kind() string { return "same" }

// sameSchema is the same-work peer's tables beside durableSchema's result
// and outbox: the attempt journal, the event log and the checkpoints. Each
// has its primary key and no other index: what the work needs, not what a
// console or a relay would read by.
const sameSchema = `
CREATE TABLE bench_attempts (
	id                  bigserial PRIMARY KEY,
	job_id              bigint NOT NULL,
	job_attempt         integer NOT NULL,
	stage               text NOT NULL,
	chunk               integer NOT NULL,
	provider_key        text NOT NULL,
	outcome             text NOT NULL,
	billed              boolean NOT NULL DEFAULT false,
	prompt_tokens       bigint NOT NULL DEFAULT 0,
	completion_tokens   bigint NOT NULL DEFAULT 0,
	latency_ms          bigint NOT NULL DEFAULT 0,
	provider_request_id text NOT NULL DEFAULT '',
	model               text NOT NULL,
	created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE bench_events (
	job_id     bigint NOT NULL,
	seq        integer NOT NULL,
	status     text NOT NULL,
	stage      text NOT NULL,
	attempt    integer NOT NULL,
	message    text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (job_id, seq)
);
CREATE TABLE bench_checkpoints (
	job_id     bigint NOT NULL,
	stage      text NOT NULL,
	chunk      integer NOT NULL,
	stage_key  text NOT NULL,
	attempt    integer NOT NULL,
	output     bytea NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (job_id, stage, chunk)
);`

// simModel is the model of the bench's pipelines' default profile.
const simModel = "oncejob-sim-1"

// sameWorker works same-work jobs on pool, calling the simulator at
// simURL.
type sameWorker struct {
	river.WorkerDefaults[sameArgs]
	pool   *pgxpool.Pool
	simURL string
	http   *http.Client
}

func newSameWorker(pool *pgxpool.Pool, simURL string) *sameWorker {
	return &sameWorker{pool: pool, simURL: simURL, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024},
	}}
}

// chatAnswer is what the worker keeps of a chat completion.
type chatAnswer struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

func (w *sameWorker) Work(ctx context.Context, j *river.Job[sameArgs]) error {
	key := fmt.Sprintf("river:%d:llm_done:0", j.ID)
	attemptID, err := w.claim(ctx, j, key)
	if err != nil {
		return err
	}
	start := time.Now()
	ans, err := w.call(ctx, key, j.Args.Document)
	if err != nil {
		return err
	}
	return w.complete(ctx, j, attemptID, ans, time.Since(start))
}

// claim commits the attempt's journal row and the "claimed" event, before
// the call, and returns the journal row's id.
func (w *sameWorker) claim(ctx context.Context, j *river.Job[sameArgs], key string) (int64, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO bench_attempts (job_id, job_attempt, stage, chunk, provider_key, outcome, model)
		VALUES ($1, $2, 'llm_done', 0, $3, 'pending', $4) RETURNING id`, j.ID, j.Attempt, key, simModel).Scan(&id); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_events (job_id, seq, status, stage, attempt, message)
		VALUES ($1, $2, 'running', 'uploaded', $3, 'claimed')`, j.ID, 2*j.Attempt-1, j.Attempt); err != nil {
		return 0, err
	}
	return id, tx.Commit(ctx)
}

// call is one chat completion of doc, as oncejob's light pipeline sends it.
func (w *sameWorker) call(ctx context.Context, key, doc string) (chatAnswer, error) {
	body, err := json.Marshal(map[string]any{
		"model":           simModel,
		"messages":        []map[string]string{{"role": "user", "content": doc}},
		"temperature":     0,
		"response_format": map[string]string{"type": "json_object"},
	})
	if err != nil {
		return chatAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.simURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return chatAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := w.http.Do(req)
	if err != nil {
		return chatAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return chatAnswer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return chatAnswer{}, fmt.Errorf("chat completion: %s: %s", resp.Status, b)
	}
	var ans chatAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		return chatAnswer{}, err
	}
	if len(ans.Choices) != 1 || !json.Valid([]byte(ans.Choices[0].Message.Content)) {
		return chatAnswer{}, fmt.Errorf("chat completion: no JSON answer in %s", b)
	}
	return ans, nil
}

// complete writes the journal's answer, the checkpoint, the result, the
// outbox row and the "published" event, and completes the job, in one
// transaction.
func (w *sameWorker) complete(ctx context.Context, j *river.Job[sameArgs], attemptID int64, ans chatAnswer, latency time.Duration) error {
	output := ans.Choices[0].Message.Content
	stageKey := sha256.Sum256([]byte(simModel + "\x00" + j.Args.Document))
	envelope, err := outboxEnvelope(j, output, ans)
	if err != nil {
		return err
	}
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `UPDATE bench_attempts SET outcome = 'succeeded', billed = true, prompt_tokens = $2,
		completion_tokens = $3, latency_ms = $4, provider_request_id = $5 WHERE id = $1`,
		attemptID, ans.Usage.PromptTokens, ans.Usage.CompletionTokens, latency.Milliseconds(), ans.ID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_checkpoints (job_id, stage, chunk, stage_key, attempt, output)
		VALUES ($1, 'llm_done', 0, $2, $3, $4)`, j.ID, hex.EncodeToString(stageKey[:]), j.Attempt, []byte(output)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_results (job_id, output) VALUES ($1, $2)`, j.ID, output); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_outbox (job_id, topic, payload) VALUES ($1, 'job.succeeded', $2)`, j.ID, envelope); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_events (job_id, seq, status, stage, attempt, message)
		VALUES ($1, $2, 'succeeded', 'published', $3, 'published')`, j.ID, 2*j.Attempt, j.Attempt); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, j); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// outboxEnvelope is the event's payload, shaped as oncejob's job.succeeded
// envelope (docs/architecture.md, "Events"): the output and the usage.
func outboxEnvelope(j *river.Job[sameArgs], output string, ans chatAnswer) ([]byte, error) {
	id := fmt.Sprintf("job:%d:job.succeeded:0", j.ID)
	return json.Marshal(map[string]any{
		"version": 1, "type": "job.succeeded", "id": id,
		"time": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"data": map[string]any{
			"job_id": j.ID, "tenant": "default", "pipeline": "light", "pipeline_version": 1,
			"status": "succeeded", "stage": "published", "attempt": j.Attempt,
			"output": json.RawMessage(output),
			"usage": map[string]any{
				"prompt_tokens": ans.Usage.PromptTokens, "completion_tokens": ans.Usage.CompletionTokens, "llm_calls": 1,
			},
		},
	})
}

// checkSameDone checks that each of the n same-work jobs wrote one
// answered journal row, one checkpoint and its two events.
func checkSameDone(ctx context.Context, check *pgx.Conn, n int) error {
	var attempts, checkpoints, events int
	if err := check.QueryRow(ctx, `SELECT
		(SELECT count(DISTINCT job_id) FROM bench_attempts WHERE outcome = 'succeeded' AND billed),
		(SELECT count(DISTINCT job_id) FROM bench_checkpoints),
		(SELECT count(*) FROM bench_events)`).Scan(&attempts, &checkpoints, &events); err != nil {
		return err
	}
	if attempts != n || checkpoints != n || events != 2*n {
		return fmt.Errorf("%s: %d answered journal rows, %d checkpoints, %d events, want %d, %d, %d",
			sysRiverSame, attempts, checkpoints, events, n, n, 2*n)
	}
	return nil
}
