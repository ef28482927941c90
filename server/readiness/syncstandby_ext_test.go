package readiness_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/pgcluster"
)

// TestNotReadyWhileWritesCannotCommit (issue 30, finding 9): a throwaway
// Postgres whose synchronous_standby_names names a standby that is not
// there answers reads while every commit waits forever for its
// confirmation. Before, the probe pinged (a read) and called the server
// ready; now it commits a write within WriteTimeout too, and /readyz
// answers 503 naming it until the setting is cleared, when it is ready
// again by itself.
func TestNotReadyWhileWritesCannotCommit(t *testing.T) {
	t.Parallel()
	pg := pgcluster.ForTest(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(ctx) })
	setSyncStandby := func(names string) {
		_, err := admin.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'")
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "SELECT pg_reload_conf()")
		require.NoError(t, err)
	}
	// A store opened after a change: its connections start with the
	// reloaded configuration.
	open := func() *storepg.Store {
		st, err := storepg.Open(ctx, pg.URL("postgres"))
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	probe := func(st *storepg.Store) (*readiness.Probe, error) {
		p, err := readiness.New(readiness.Config{Store: st, WritePinger: st, WriteTimeout: 300 * time.Millisecond})
		require.NoError(t, err)
		return p, p.Check(ctx)
	}
	readyz := func(p *readiness.Probe) (int, string) {
		rec := httptest.NewRecorder()
		p.ReadyzHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}

	p, err := probe(open())
	require.NoError(t, err)
	code, _ := readyz(p)
	require.Equal(t, http.StatusOK, code)

	setSyncStandby("lost_standby")
	st := open()
	// Reads answer; a write does not commit.
	require.NoError(t, st.Ping(ctx))
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	require.Error(t, st.PingWrite(wctx), "a commit waits for the lost standby")
	cancel()
	p, err = probe(st)
	require.Error(t, err)
	require.False(t, p.Ready())
	code, body := readyz(p)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: the job store answers but commits no write within 300ms")

	setSyncStandby("")
	require.NoError(t, p.Check(ctx), "ready again once commits are confirmed")
	code, _ = readyz(p)
	require.Equal(t, http.StatusOK, code)
}
