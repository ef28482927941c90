package relay_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk/receiver"
	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
	"github.com/oncejob/oncejob/store/storetest"
)

// testStore is what these tests drive: jobs made to announce events, and
// the relay's view.
type testStore interface {
	store.Store
	store.EngineStore
	store.OperatorStore
	relay.Store
}

func newPG(t *testing.T) testStore { return storepgtest.NewTestStore(t) }

func newSQLite(t *testing.T) testStore {
	return storesqlitetest.NewTestStore(t)
}

// submit creates a queued job of tenant.
func submit(t *testing.T, st testStore, tenant, pipeline string) *store.Job {
	t.Helper()
	doc := []byte("document " + uuid.NewString())
	sum := sha256.Sum256(doc)
	key := uuid.NewString()
	res, err := st.JobSubmit(t.Context(), &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: tenant, Method: "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey: key, Fingerprint: "fp-" + key, DedupKey: "dedup:v1:" + key,
		Pipeline: pipeline, PipelineVersion: 1, PromptVersion: "1", ModelProfile: "default",
		Document: doc, DocumentSHA256: hex.EncodeToString(sum[:]), DocumentMedia: "text/plain",
		Params: []byte(`{}`),
	})
	require.NoError(t, err)
	return res.Job
}

// claim claims the job with id (other runnable jobs are claimed too and
// left running: tests here make jobs one at a time).
func claim(t *testing.T, st testStore, id string) store.Lease {
	t.Helper()
	for {
		jobs, err := st.JobClaim(t.Context(), &store.JobClaimParams{Owner: "w", Limit: 10, LeaseDuration: time.Minute})
		require.NoError(t, err)
		for _, j := range jobs {
			if j.ID == id {
				return store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}
			}
		}
		require.NotEmpty(t, jobs, "job %s is not claimable", id)
	}
}

// failThenSucceed makes a job announce job.failed, then (replayed)
// job.succeeded: two events whose order a receiver must keep.
func failThenSucceed(t *testing.T, st testStore, tenant string) *store.Job {
	t.Helper()
	job := failJob(t, st, tenant, "summarize")
	_, err := st.JobReplay(t.Context(), &store.JobReplayParams{Tenant: tenant, ID: job.ID})
	require.NoError(t, err)
	_, err = storetest.Publish(t.Context(), st, &store.JobPublishParams{Lease: claim(t, st, job.ID), Output: []byte(`{"ok": true}`), Message: "published"})
	require.NoError(t, err)
	return job
}

// failJob makes a job announce job.failed.
func failJob(t *testing.T, st testStore, tenant, pipeline string) *store.Job {
	t.Helper()
	job := submit(t, st, tenant, pipeline)
	_, err := st.JobTransition(t.Context(), &store.JobTransitionParams{
		Lease: claim(t, st, job.ID), To: store.JobStatusFailed, Error: &store.JobError{Code: "BAD", Message: "bad input"},
	})
	require.NoError(t, err)
	return job
}

// secretFile writes a fresh whsec_ secret to a file and returns both.
func secretFile(t *testing.T) (string, relay.Secret) {
	t.Helper()
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(secret), 0o600))
	return secret, relay.Secret{File: path}
}

// memInbox is an apply-once inbox in memory; it records the order of
// applications.
type memInbox struct {
	mu      sync.Mutex
	applied map[string]int // event id -> times the effect ran
	order   []*receiver.Event
}

func newMemInbox() *memInbox { return &memInbox{applied: map[string]int{}} }

func (m *memInbox) Apply(_ context.Context, e *receiver.Event) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied[e.ID] > 0 {
		return "r-" + e.ID, false, nil
	}
	m.applied[e.ID]++
	m.order = append(m.order, e)
	return "r-" + e.ID, true, nil
}

func (m *memInbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.order)
}

func (m *memInbox) events() []*receiver.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*receiver.Event(nil), m.order...)
}

// webhookReceiver is a real HTTP receiver on loopback.
func webhookReceiver(t *testing.T, secret string, inbox receiver.Applier) *httptest.Server {
	t.Helper()
	v, err := receiver.NewVerifier(secret)
	require.NoError(t, err)
	srv := httptest.NewServer(receiver.NewHandler(v, inbox))
	t.Cleanup(srv.Close)
	return srv
}

// startRelay runs a relay until the test ends.
func startRelay(t *testing.T, cfg relay.Config) *relay.Relay {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = -1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Deliverer = delivererOf(cfg.Store)
	r, err := relay.New(t.Context(), cfg)
	require.NoError(t, err)
	r.TestSignals().Round.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = r.Close() })
	return r
}

// delivererOf is what cmd/oncejob wires as the relay's Deliverer: the
// store itself where it routes and delivers at once (Postgres), else nil.
func delivererOf(st relay.Store) store.OutboxDeliverer {
	if d, ok := st.(store.OutboxDeliverer); ok {
		return d
	}
	return nil
}

// deliveries lists every delivery of the tenant.
func deliveries(t *testing.T, st testStore, tenant string) []*store.Delivery {
	t.Helper()
	var out []*store.Delivery
	params := &store.DeliveryListParams{Tenant: tenant, Limit: 500}
	for {
		page, err := st.DeliveryList(t.Context(), params)
		require.NoError(t, err)
		out = append(out, page.Deliveries...)
		if page.Next == nil {
			return out
		}
		params.After = page.Next
	}
}

// waitDelivered waits until the tenant has n deliveries, all delivered.
func waitDelivered(t *testing.T, st testStore, tenant string, n int) []*store.Delivery {
	t.Helper()
	var ds []*store.Delivery
	require.Eventually(t, func() bool {
		ds = deliveries(t, st, tenant)
		if len(ds) != n {
			return false
		}
		for _, d := range ds {
			if d.Status != store.DeliveryStatusDelivered {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "deliveries: %d of %d", len(ds), n)
	return ds
}

func webhookSink(name, tenant, url string, secret relay.Secret, events ...string) relay.SinkConfig {
	if len(events) == 0 {
		events = relay.EventTypes
	}
	return relay.SinkConfig{
		Name: name, Tenant: tenant, Events: events,
		Webhook: &relay.WebhookConfig{URL: url, Secret: secret, Timeout: 5 * time.Second, AllowPrivateNetwork: true},
	}
}
