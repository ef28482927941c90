package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/worker"
)

// statementCounter is a pgx tracer counting the statements a pool runs, by
// the sqlc name of their query. A claim that found nothing ("SELECT 0") is
// an idle poll, counted apart.
type statementCounter struct {
	mu     sync.Mutex
	byName map[string]int
	idle   int
}

type queryNameKey struct{}

var sqlcName = regexp.MustCompile(`-- name: (\w+)`)

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	name := "unnamed"
	if m := sqlcName.FindStringSubmatch(data.SQL); m != nil {
		name = m[1]
	}
	return context.WithValue(ctx, queryNameKey{}, name)
}

func (c *statementCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	name, _ := ctx.Value(queryNameKey{}).(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "JobClaim" && data.CommandTag.RowsAffected() == 0 {
		c.idle++
		return
	}
	c.byName[name]++
}

// engineWrites are the statements that write (each its own transaction,
// so a WAL flush at its commit).
var engineWrites = map[string]bool{
	"JobClaim": true, "JobHeartbeat": true, "JobHeartbeatMany": true, "CheckpointWrite": true,
	"CheckpointWriteMany": true, "LLMAttemptRecord": true, "JobPublish": true, "JobPublishMany": true,
	"JobTransition": true,
}

// TestLightJobStatements counts, with a tracer on the worker's pool, the
// statements and writing statements per light job (one chunk, one LLM call)
// on Postgres, and holds the batched engine to at most 4 statements and 2
// writes per job, amortised (docs/performance.md, "Statements per job").
func TestLightJobStatements(t *testing.T) {
	t.Parallel()
	const jobs = 100
	counter := &statementCounter{byName: map[string]int{}}
	config, err := pgxpool.ParseConfig(storepgtest.NewMigratedSchemaURL(t))
	require.NoError(t, err)
	config.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := storepg.New(pool)
	t.Cleanup(st.Close)

	sim, err := llmsim.Start("", llmsim.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	reg := registry(t, summarize(1, "1", `{type: object}`, ""))
	var submitted []*store.Job
	for i := range jobs {
		submitted = append(submitted, submit(t, st, reg, "acme", fmt.Sprintf("Light document %d: one short chunk.", i)))
	}
	counter.mu.Lock()
	clear(counter.byName) // the submissions are not the engine's
	counter.mu.Unlock()

	provider, err := llm.NewOpenAI(llm.Config{BaseURL: sim.URL, Timeout: 10 * time.Second})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: st, Provider: provider, Pipelines: reg, Concurrency: jobs,
		LeaseDuration: 30 * time.Second, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	for _, j := range submitted {
		require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, st, j).Status)
	}
	cancel()
	<-done

	counter.mu.Lock()
	defer counter.mu.Unlock()
	var statements, writes int
	var lines []string
	for name, n := range counter.byName {
		if name == "JobGetByID" {
			continue // the test's own polling
		}
		statements += n
		if engineWrites[name] {
			writes += n
		}
		lines = append(lines, fmt.Sprintf("%s=%d", name, n))
	}
	sort.Strings(lines)
	perJob, writesPerJob := float64(statements)/jobs, float64(writes)/jobs
	t.Logf("%d light jobs: %.2f statements and %.2f writing statements per job (%s; idle claims %d)",
		jobs, perJob, writesPerJob, strings.Join(lines, " "), counter.idle)
	require.LessOrEqual(t, perJob, 4.0, "statements per light job")
	require.LessOrEqual(t, writesPerJob, 2.0, "writing statements (WAL-flushing commits) per light job")
}
