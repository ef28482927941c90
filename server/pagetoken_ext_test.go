package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/watch"
)

// listSpy is a Postgres store that counts the list reads a token would
// reach: a token refused before use never gets there.
type listSpy struct {
	*storepg.Store
	lists atomic.Int32
}

func (s *listSpy) JobList(ctx context.Context, p *store.JobListParams) (*store.JobListResult, error) {
	s.lists.Add(1)
	return s.Store.JobList(ctx, p)
}

func (s *listSpy) RunList(ctx context.Context, p *store.RunListParams) (*store.RunListResult, error) {
	s.lists.Add(1)
	return s.Store.RunList(ctx, p)
}

func (s *listSpy) ScheduleList(ctx context.Context, p *store.ScheduleListParams) (*store.ScheduleListResult, error) {
	s.lists.Add(1)
	return s.Store.ScheduleList(ctx, p)
}

func (s *listSpy) DeliveryList(ctx context.Context, p *store.DeliveryListParams) (*store.DeliveryListResult, error) {
	s.lists.Add(1)
	return s.Store.DeliveryList(ctx, p)
}

// tokenClients are the clients of one server, with a watch hub, whose page
// token secret is the test's.
type tokenClients struct {
	jobs       oncejobv1.JobServiceClient
	runs       oncejobv1.RunServiceClient
	schedules  oncejobv1.ScheduleServiceClient
	deliveries oncejobv1.DeliveryServiceClient
}

func setupTokens(t *testing.T, st *listSpy, secret []byte) *tokenClients {
	t.Helper()
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(fmt.Sprintf(
		"keys:\n  - tenant: acme\n    sha256: %s\n  - tenant: globex\n    sha256: %s\n",
		tenant.HashKey(keyAcme), tenant.HashKey(keyGlobex))), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))

	hub, err := watch.New(watch.Config{Store: st, Logger: logger, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()
	t.Cleanup(func() { stopHub(); <-hubDone })

	s, err := server.New(server.Config{Store: st, Keys: keys, Logger: logger, Watch: hub, PageTokenSecret: secret})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(s.GRPC.Stop)
	t.Cleanup(hub.Shutdown)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &tokenClients{
		jobs:       oncejobv1.NewJobServiceClient(conn),
		runs:       oncejobv1.NewRunServiceClient(conn),
		schedules:  oncejobv1.NewScheduleServiceClient(conn),
		deliveries: oncejobv1.NewDeliveryServiceClient(conn),
	}
}

// watchFrom opens WatchJobs after cursor and returns the error it ends
// with, or nil once the server says the stream is established.
func watchFrom(t *testing.T, c oncejobv1.JobServiceClient, apiKey, cursor string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(as(apiKey, ""))
	defer cancel()
	stream, err := c.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{AfterCursor: cursor})
	if err != nil {
		return err
	}
	if h, err := stream.Header(); err == nil && h.Get(server.EstablishedHeader) != nil {
		return nil
	}
	_, err = stream.Recv()
	return err
}

// flip returns token with one bit of its i-th byte flipped.
func flip(t *testing.T, token string, i int) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	b[i%len(b)] ^= 0x01
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestPageTokensAreSignedForTenantAndList: a page token or watch cursor is
// accepted only unaltered, by the list it came from, for the tenant it was
// issued to; anything else, forged ones included, is INVALID_ARGUMENT on
// the field, and no store read happens (issue 20).
func TestPageTokensAreSignedForTenantAndList(t *testing.T) {
	t.Parallel()
	st := &listSpy{Store: storepgtest.NewTestStore(t)}
	c := setupTokens(t, st, pagetoken.NewSecret())
	for i := range 3 {
		submit(t, c.jobs, keyAcme, fmt.Sprintf("acme %d", i))
		submit(t, c.jobs, keyGlobex, fmt.Sprintf("globex %d", i))
	}
	first, err := c.jobs.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 1})
	require.NoError(t, err)
	token, cursor := first.GetNextPageToken(), first.GetWatchCursor()
	require.NotEmpty(t, token)
	require.NotEmpty(t, cursor)

	// The tokens work where they belong.
	second, err := c.jobs.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 1, PageToken: token})
	require.NoError(t, err)
	require.Len(t, second.GetJobs(), 1)
	require.NotEqual(t, first.GetJobs()[0].GetId(), second.GetJobs()[0].GetId())
	require.NoError(t, watchFrom(t, c.jobs, keyAcme, cursor))

	// Neither shows what it holds (issue #31, finding 11): the cursor's
	// position is the database's global transaction counter, which tells
	// a tenant how busy every other tenant is. Before, the payload was in
	// clear: "w1:<tx>:<id>" and the page token's JSON.
	b, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	require.NotContains(t, string(b), first.GetJobs()[0].GetId(), "a page token's payload is encrypted")
	b, err = base64.RawURLEncoding.DecodeString(cursor)
	require.NoError(t, err)
	payload := b[:len(b)-16]
	require.NotRegexp(t, `^[w0-9:]*$`, string(payload), "a cursor's payload (w1:<tx>:<id> in clear) is encrypted")

	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	listJobs := func(apiKey, token string) func() error {
		return func() error {
			_, err := c.jobs.ListJobs(as(apiKey, ""), &oncejobv1.ListJobsRequest{PageSize: 1, PageToken: token})
			return err
		}
	}
	unsigned := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name, field string
		call        func() error
	}{
		{"flipped payload byte", "page_token", listJobs(keyAcme, flip(t, token, 3))},
		{"flipped tag byte", "page_token", listJobs(keyAcme, flip(t, token, len(raw)-1))},
		{"truncated", "page_token", listJobs(keyAcme, token[:len(token)-2])},
		{"flipped cursor byte", "after_cursor", func() error { return watchFrom(t, c.jobs, keyAcme, flip(t, cursor, 1)) }},
		{"jobs token to ListRuns", "page_token", func() error {
			_, err := c.runs.ListRuns(as(keyAcme, ""), &oncejobv1.ListRunsRequest{PageToken: token})
			return err
		}},
		{"jobs token to ListSchedules", "page_token", func() error {
			_, err := c.schedules.ListSchedules(as(keyAcme, ""), &oncejobv1.ListSchedulesRequest{PageToken: token})
			return err
		}},
		{"jobs token to ListDeliveries", "page_token", func() error {
			_, err := c.deliveries.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{PageToken: token})
			return err
		}},
		{"watch cursor to ListJobs", "page_token", listJobs(keyAcme, cursor)},
		{"jobs token to WatchJobs", "after_cursor", func() error { return watchFrom(t, c.jobs, keyAcme, token) }},
		{"another tenant's page token", "page_token", listJobs(keyGlobex, token)},
		{"another tenant's cursor", "after_cursor", func() error { return watchFrom(t, c.jobs, keyGlobex, cursor) }},
		{"forged unsigned jobs token", "page_token", listJobs(keyAcme,
			unsigned(fmt.Sprintf(`{"t":%d,"id":%q}`, time.Now().UnixMicro(), first.GetJobs()[0].GetId())))},
		{"forged unsigned runs token", "page_token", func() error {
			_, err := c.runs.ListRuns(as(keyAcme, ""), &oncejobv1.ListRunsRequest{PageToken: unsigned(`{"t":1700000000000000,"id":"0190f5a0-0000-7000-8000-000000000000"}`)})
			return err
		}},
		{"forged unsigned delivery token", "page_token", func() error {
			_, err := c.deliveries.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{PageToken: unsigned("d1:0:1")})
			return err
		}},
		{"forged unsigned cursor", "after_cursor", func() error { return watchFrom(t, c.jobs, keyAcme, unsigned("w1:0:0")) }},
		{"not base64", "page_token", listJobs(keyAcme, "garbage!")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := st.lists.Load()
			requireBadInput(t, tc.call(), tc.field, "this server issued")
			require.Equal(t, before, st.lists.Load(), "refused before any store read")
		})
	}
}

// TestSignedTokenIsParsedBeforeUse: a token with a valid seal but content
// the server never writes (an id that is no UUID, a time out of the
// stores' range, a rank or position out of range) is INVALID_ARGUMENT on
// the field, and never reaches the store (issue 20, finding 3).
func TestSignedTokenIsParsedBeforeUse(t *testing.T) {
	t.Parallel()
	secret := pagetoken.NewSecret()
	sig, err := pagetoken.New(secret)
	require.NoError(t, err)
	st := &listSpy{Store: storepgtest.NewTestStore(t)}
	c := setupTokens(t, st, secret)
	submit(t, c.jobs, keyAcme, "a job")

	const id = "0190f5a0-0000-7000-8000-000000000000"
	jobs := func(payload string) func() error {
		return func() error {
			_, err := c.jobs.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageToken: sig.Seal(pagetoken.Jobs, "acme", []byte(payload))})
			return err
		}
	}
	for _, tc := range []struct {
		name, field string
		call        func() error
	}{
		{"jobs: id not a UUID", "page_token", jobs(`{"t":1700000000000000,"id":"not-a-uuid"}`)},
		{"jobs: id not canonical", "page_token", jobs(`{"t":1700000000000000,"id":"{` + id + `}"}`)},
		{"jobs: no id", "page_token", jobs(`{"t":1700000000000000}`)},
		{"jobs: time before year 1", "page_token", jobs(`{"t":-9223372036854775808,"id":"` + id + `"}`)},
		{"jobs: time after year 9999", "page_token", jobs(`{"t":9223372036854775807,"id":"` + id + `"}`)},
		{"jobs: not JSON", "page_token", jobs(`{"t":`)},
		{"runs: id not a UUID", "page_token", func() error {
			_, err := c.runs.ListRuns(as(keyAcme, ""), &oncejobv1.ListRunsRequest{PageToken: sig.Seal(pagetoken.Runs, "acme", []byte(`{"t":1,"id":"x'; drop table runs"}`))})
			return err
		}},
		{"schedules: time out of range", "page_token", func() error {
			_, err := c.schedules.ListSchedules(as(keyAcme, ""), &oncejobv1.ListSchedulesRequest{PageToken: sig.Seal(pagetoken.Schedules, "acme", []byte(`{"t":-9223372036854775808,"id":"`+id+`"}`))})
			return err
		}},
		{"deliveries: rank out of range", "page_token", func() error {
			_, err := c.deliveries.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{PageToken: sig.Seal(pagetoken.Deliveries, "acme", []byte("d1:7:1"))})
			return err
		}},
		{"deliveries: negative id", "page_token", func() error {
			_, err := c.deliveries.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{PageToken: sig.Seal(pagetoken.Deliveries, "acme", []byte("d1:0:-1"))})
			return err
		}},
		{"cursor: negative position", "after_cursor", func() error {
			return watchFrom(t, c.jobs, keyAcme, sig.Seal(pagetoken.WatchCursor, "acme", []byte("w1:-1:0")))
		}},
		{"cursor: not a number", "after_cursor", func() error {
			return watchFrom(t, c.jobs, keyAcme, sig.Seal(pagetoken.WatchCursor, "acme", []byte("w1:1e9:0")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := st.lists.Load()
			requireBadInput(t, tc.call(), tc.field, "this server issued")
			require.Equal(t, before, st.lists.Load(), "refused before any store read")
		})
	}

	// The same key seals what the server accepts: the refusals above are
	// for the content, not the seal.
	_, err = c.jobs.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageToken: sig.Seal(pagetoken.Jobs, "acme", []byte(`{"t":1700000000000000,"id":"`+id+`"}`))})
	require.NoError(t, err)
	require.NoError(t, watchFrom(t, c.jobs, keyAcme, sig.Seal(pagetoken.WatchCursor, "acme", []byte("w1:0:0"))))
}

// TestPageTokensWorkAcrossReplicas: two servers, each with its own pool on
// one Postgres schema, load the one secret (racing, as replicas starting
// together do), and a token either issues pages on the other; a server of
// another store (another secret) refuses it.
func TestPageTokensWorkAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := storepgtest.NewMigratedSchemaURL(t)
	replica := func() *listSpy {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		s := storepg.New(pool)
		t.Cleanup(s.Close)
		return &listSpy{Store: s}
	}
	stores := []*listSpy{replica(), replica()}
	secrets := make([][]byte, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			var err error
			secrets[i], err = pagetoken.LoadSecret(t.Context(), st)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, secrets[0], secrets[1], "replicas share the secret")
	a, b := setupTokens(t, stores[0], secrets[0]), setupTokens(t, stores[1], secrets[1])
	other := setupTokens(t, &listSpy{Store: storepgtest.NewTestStore(t)}, pagetoken.NewSecret())

	ids := map[string]bool{}
	for i := range 3 {
		ids[submit(t, a.jobs, keyAcme, fmt.Sprintf("doc %d", i))] = true
	}
	seen := map[string]bool{}
	req := &oncejobv1.ListJobsRequest{PageSize: 1}
	for i := 0; ; i++ {
		on := []*tokenClients{a, b}[i%2] // every page on the other replica
		resp, err := on.jobs.ListJobs(as(keyAcme, ""), req)
		require.NoError(t, err)
		for _, j := range resp.GetJobs() {
			require.False(t, seen[j.GetId()], "a job is listed once")
			seen[j.GetId()] = true
		}
		if i == 0 {
			_, err = other.jobs.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 1, PageToken: resp.GetNextPageToken()})
			requireBadInput(t, err, "page_token", "this server issued")
			require.NoError(t, watchFrom(t, b.jobs, keyAcme, resp.GetWatchCursor()), "a replica's watch cursor watches on the other")
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	require.Equal(t, ids, seen)
}
