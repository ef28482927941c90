package server_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestOneTenantCannotTakeTheStore (issue #31): one tenant's calls that
// each hold a store connection for long — here CancelJob on a job whose
// row the test keeps locked, as slow pages would — take at most the
// tenant's share of the pool (store_calls, half its 4 connections), the
// next ones wait for a slot without a connection, and past 4 × the share
// waiting a call is refused at once with TENANT_STORE_CALLS; meanwhile
// another tenant's calls succeed and the readiness probe says ready. On
// the server before the share, the blocked calls took all 4 connections:
// the other tenant's calls and the probe's ping waited for one until their
// deadlines.
func TestOneTenantCannotTakeTheStore(t *testing.T) {
	t.Parallel()
	const pool, share = 4, 2
	dbURL := storepgtest.NewMigratedSchemaURL(t)
	st, err := storepg.Open(t.Context(), dbURL+fmt.Sprintf("&pool_max_conns=%d", pool))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.Equal(t, pool, st.Connections())
	lim, err := limits.New(limits.Config{Default: limits.Tenant{StoreCalls: st.Connections() / 2}})
	require.NoError(t, err)
	lim.TestSignals().StoreSlot.Init()
	lim.TestSignals().StoreSlotWait.Init()
	b := setup(t, setupOpts{store: st, limits: lim, quiet: true})
	probe, err := readiness.New(readiness.Config{Store: st})
	require.NoError(t, err)

	job, err := b.client.SubmitJob(as(keyAcme, "locked"), submitReq("a job whose row the test locks"))
	require.NoError(t, err)
	locker, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = locker.Close(context.Background()) })
	tx, err := locker.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", job.GetJob().GetId())
	require.NoError(t, err)

	// acme: the share's calls block in Postgres, holding a connection
	// each; 4 × the share wait for a slot.
	admitted := share + 4*share
	var wg sync.WaitGroup
	codesSeen := make(chan codes.Code, admitted)
	for i := range admitted {
		wg.Go(func() {
			_, err := b.client.CancelJob(as(keyAcme, fmt.Sprintf("cancel-%d", i)), &oncejobv1.CancelJobRequest{JobId: job.GetJob().GetId()})
			codesSeen <- status.Code(err)
		})
	}
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	for range share {
		name, err := lim.TestSignals().StoreSlot.Wait()
		require.NoError(t, err)
		require.Equal(t, "acme", name)
	}
	for range 4 * share {
		name, err := lim.TestSignals().StoreSlotWait.Wait()
		require.NoError(t, err)
		require.Equal(t, "acme", name)
	}
	schema, err := url.Parse(dbURL)
	require.NoError(t, err)
	// Observed from a connection of its own: pg_stat_activity is a
	// snapshot taken once per transaction, and the locker's is open.
	observer, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = observer.Close(context.Background()) })
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, observer.QueryRow(t.Context(),
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
			schema.Query().Get("application_name")).Scan(&waiting))
		return waiting == share
	}, 10*time.Second, 10*time.Millisecond, "acme's admitted calls wait for the row lock in Postgres")
	require.LessOrEqual(t, st.Pool().Stat().AcquiredConns(), int32(share), "acme holds no more than its share of the pool")

	// One more acme call is refused at once: too many wait already.
	_, err = b.client.CancelJob(as(keyAcme, "cancel-over"), &oncejobv1.CancelJobRequest{JobId: job.GetJob().GetId()})
	requireReason(t, err, codes.ResourceExhausted, limits.ReasonStoreCalls)
	requireRetryInfo(t, err)

	// globex is served, and the probe says ready. The deadline bounds the
	// old server's wait for a connection; it is not a timing assertion.
	for i := range 5 {
		ctx, cancel := context.WithTimeout(as(keyGlobex, fmt.Sprintf("globex-%d", i)), 30*time.Second)
		resp, err := b.client.SubmitJob(ctx, submitReq(fmt.Sprintf("globex %d", i)))
		require.NoError(t, err, "globex's SubmitJob beside acme's blocked calls")
		_, err = b.client.GetJob(ctx, &oncejobv1.GetJobRequest{JobId: resp.GetJob().GetId()})
		require.NoError(t, err, "globex's GetJob beside acme's blocked calls")
		_, err = b.client.ListJobs(ctx, &oncejobv1.ListJobsRequest{PageSize: 10})
		require.NoError(t, err, "globex's ListJobs beside acme's blocked calls")
		cancel()
		pctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		require.NoError(t, probe.Check(pctx), "readiness beside acme's blocked calls")
		cancel()
	}

	require.NoError(t, tx.Rollback(t.Context()))
	wg.Wait()
	close(codesSeen)
	for c := range codesSeen {
		require.Contains(t, []codes.Code{codes.OK, codes.FailedPrecondition, codes.ResourceExhausted}, c, "acme's waiting calls end")
	}
}
