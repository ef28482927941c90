package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	_ "modernc.org/sqlite"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite"
)

// appliedLog is what a receiver applied: how often each event, and each
// job's event types in the order applied.
type appliedLog struct {
	times map[string]int
	order map[string][]string
}

func newAppliedLog() *appliedLog {
	return &appliedLog{times: map[string]int{}, order: map[string][]string{}}
}

func (l *appliedLog) add(eventID, eventType, jobID string) {
	l.times[eventID]++
	l.order[jobID] = append(l.order[jobID], eventType)
}

// hookReceiver is the example receiver (examples/receiver, the real
// binary) on a SQLite file of its own: one webhook sink's target, applying
// each event once through its inbox.
type hookReceiver struct {
	url string
	db  string
}

func startHookReceiver(t *testing.T, name, secret string) *hookReceiver {
	t.Helper()
	h := &hookReceiver{db: filepath.Join(t.TempDir(), name+".db")}
	addr := freeAddr(t)
	startBinary(t, name, []string{"WEBHOOK_SECRETS=" + secret}, "receiver", "--addr", addr, "--sqlite", h.db)
	h.url = "http://" + addr + "/" + name
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "receiver %s never listened", name)
	return h
}

func (h *hookReceiver) applied(t *testing.T) *appliedLog {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+h.db+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, event_type, job_id FROM receiver_effects ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	l := newAppliedLog()
	for rows.Next() {
		var id, typ, job string
		require.NoError(t, rows.Scan(&id, &typ, &job))
		l.add(id, typ, job)
	}
	require.NoError(t, rows.Err())
	return l
}

// streamReceiver is a JetStream stream of the test's own: it stores an
// event once per Nats-Msg-Id inside its duplicate window.
type streamReceiver struct {
	js             jetstream.JetStream
	stream, prefix string
}

func newStreamReceiver(t *testing.T) *streamReceiver {
	t.Helper()
	nc, err := nats.Connect(nats.DefaultURL, nats.Timeout(2*time.Second))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS with JetStream on %s: %v", nats.DefaultURL, err)
		}
		t.Skipf("SKIP: no NATS on %s (%v); install nats-server and run it with -js", nats.DefaultURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	s := &streamReceiver{js: js, stream: "ONCEJOB_MULTISINK_" + hex.EncodeToString(b), prefix: "ms" + hex.EncodeToString(b)}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), s.stream) })
	return s
}

// applied reads the whole stream in sequence order.
func (s *streamReceiver) applied(t *testing.T) *appliedLog {
	t.Helper()
	l := newAppliedLog()
	st, err := s.js.Stream(t.Context(), s.stream)
	if err != nil {
		return l // not created yet: the relay creates it at start
	}
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		msg, err := st.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		var env struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				JobID string `json:"job_id"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(msg.Data, &env))
		require.Equal(t, env.ID, msg.Header.Get(jetstream.MsgIDHeader), "Nats-Msg-Id is the event id")
		l.add(env.ID, env.Type, env.Data.JobID)
	}
	return l
}

// multiSink is three sinks of tenant default - two webhooks to two example
// receivers and a JetStream stream - and a fourth, "gone", whose receiver
// answers 410 Gone, so the relay disables it; and the config that names
// them.
type multiSink struct {
	hooks  map[string]*hookReceiver
	stream *streamReceiver
	gone   *httptest.Server
	config string
}

// goneSink is the sink the relay disables.
const goneSink = "gone"

func newMultiSink(t *testing.T) *multiSink {
	t.Helper()
	m := &multiSink{hooks: map[string]*hookReceiver{}, stream: newStreamReceiver(t)}
	m.gone = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) }))
	t.Cleanup(m.gone.Close)
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	secretPath := writeFile(t, "secret", secret)
	cfg := "sinks:\n"
	urls := map[string]string{goneSink: m.gone.URL}
	for _, name := range []string{"hook-a", "hook-b"} {
		m.hooks[name] = startHookReceiver(t, name, secret)
		urls[name] = m.hooks[name].url
	}
	for _, name := range []string{"hook-a", "hook-b", goneSink} {
		cfg += fmt.Sprintf(`  - name: %s
    tenant: default
    events: [job.succeeded, job.failed]
    retry: {initial_backoff: 50ms, max_backoff: 200ms, max_attempts: 1000}
    webhook:
      url: %s
      secret: {file: %s}
      timeout: 5s
      allow_private_network: true
`, name, urls[name], secretPath)
	}
	cfg += fmt.Sprintf(`  - name: stream
    tenant: default
    events: [job.succeeded, job.failed]
    retry: {initial_backoff: 50ms, max_backoff: 200ms, max_attempts: 1000}
    jetstream:
      url: %s
      stream: %s
      subject_prefix: %s
      create_stream: true
      duplicate_window: 10m
`, nats.DefaultURL, m.stream.stream, m.stream.prefix)
	m.config = writeFile(t, "oncejob.yaml", cfg)
	return m
}

// enabledSinks: the two webhooks and the stream.
const enabledSinks = 3

// deliveryState is what the tests read of a delivery, from the store or
// from ListDeliveries.
type deliveryState struct {
	sink      string
	delivered bool
}

// allDelivered reports whether every one of events is delivered to every
// enabled sink, and to the disabled one not at all.
func allDelivered(ds []deliveryState, events int) bool {
	delivered := 0
	for _, d := range ds {
		switch {
		case d.sink == goneSink && d.delivered:
			return false
		case d.sink != goneSink && !d.delivered:
			return false
		case d.delivered:
			delivered++
		}
	}
	return delivered == enabledSinks*events && len(ds) == (enabledSinks+1)*events
}

// requireAppliedOnce: each receiver applied every event of jobs exactly
// once, each job's failure before its success.
func (m *multiSink) requireAppliedOnce(t *testing.T, jobs []string) {
	t.Helper()
	logs := map[string]*appliedLog{"stream": m.stream.applied(t)}
	for name, h := range m.hooks {
		logs[name] = h.applied(t)
	}
	want := map[string]int{}
	for _, job := range jobs {
		want["job:"+job+":job.failed:0"] = 1
		want["job:"+job+":job.succeeded:1"] = 1
	}
	for name, l := range logs {
		require.Equal(t, want, l.times, "%s: every event applied once", name)
		for _, job := range jobs {
			require.Equal(t, []string{"job.failed", "job.succeeded"}, l.order[job], "%s: job %s in order", name, job)
		}
	}
}

// requireJournaled: every delivery to an enabled sink delivered, its
// journal holding a landed attempt with the sink's reference; the gone sink
// disabled, its deliveries waiting.
func requireJournaled(t *testing.T, st store.DeliveryStore, events int) {
	t.Helper()
	ctx := context.Background()
	list, err := st.DeliveryList(ctx, &store.DeliveryListParams{Tenant: "default", Limit: 10000})
	require.NoError(t, err)
	require.Len(t, list.Deliveries, (enabledSinks+1)*events, "one delivery per event and sink")
	states, err := st.SinkStateList(ctx, &store.SinkStateListParams{Tenant: "default"})
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, goneSink, states[0].Sink)
	require.Contains(t, states[0].Reason, "410 Gone")
	for _, d := range list.Deliveries {
		if d.Sink == goneSink {
			require.Equal(t, store.DeliveryStatusPending, d.Status, "a disabled sink's deliveries wait")
			continue
		}
		require.Equal(t, store.DeliveryStatusDelivered, d.Status, "delivery %d to %s", d.ID, d.Sink)
		require.NotEmpty(t, d.ExternalRef, "delivery %d to %s", d.ID, d.Sink)
		journal, err := st.DeliveryAttemptList(ctx, &store.DeliveryAttemptListParams{DeliveryID: d.ID})
		require.NoError(t, err)
		landed := 0
		for _, a := range journal {
			if a.Outcome == store.DeliveryOutcomeDelivered {
				landed++
			}
		}
		require.Positive(t, landed, "delivery %d to %s: the journal shows it delivered", d.ID, d.Sink)
	}
}

// relayUnderTest is where the relay runs: start starts it (armed by env)
// and returns it with a check of whether every delivery is delivered.
type relayUnderTest func(t *testing.T, name string, env []string) (*proc, func() bool)

// killRelayUntilDelivered SIGKILLs the relay at relay_after_send - each
// sink answered (a receiver committed, JetStream stored the event), the
// attempts are not journaled - at its first hit, then at random hits, and
// restarts it until every delivery is delivered. It returns the kills.
func killRelayUntilDelivered(t *testing.T, start relayUnderTest) int {
	t.Helper()
	const fp = "relay_after_send"
	kills := 0
	for round := 0; ; round++ {
		require.Less(t, round, 40, "events not delivered after %d kills", kills)
		var env []string
		switch {
		case round == 0:
			env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill"}
		case round < 8:
			env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill%30"}
		}
		p, delivered := start(t, fmt.Sprintf("relay-%d", round), env)
		deadline := time.Now().Add(60 * time.Second)
		for !p.done() && !delivered() {
			require.True(t, time.Now().Before(deadline), "%s neither delivered everything nor died at %s", p.name, fp)
			time.Sleep(20 * time.Millisecond) // polls other processes: no signal reaches here
		}
		if !p.done() {
			p.stopOrDieAt("failpoint: " + fp) // still armed, it may die while it drains
			return kills
		}
		require.Contains(t, p.logs.String(), "failpoint: "+fp, "the relay died, but not at the failpoint")
		kills++
	}
}

// TestMultiSinkDeliveryOnceAcrossKills is issue 19's end to end: three
// sinks of one tenant - two webhooks to two example receivers, a JetStream
// stream - and a fourth whose receiver answers 410 Gone, on Postgres (the
// relay process) and on the embedded default store (the relay inside
// serve). The relay is SIGKILLed after the sinks answered and before it
// journaled, again and again, and restarted: every event reaches every
// enabled sink, each receiver applies each event once, each job's events
// in order, and the journal shows every such delivery delivered; the gone
// sink is disabled and its deliveries wait.
func TestMultiSinkDeliveryOnceAcrossKills(t *testing.T) {
	t.Parallel()
	const jobs = 6

	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		m := newMultiSink(t)
		dbURL := storepgtest.NewMigratedSchemaURL(t)
		st, err := storepg.Open(context.Background(), dbURL)
		require.NoError(t, err)
		t.Cleanup(st.Close)
		ids := announceOn(t, st, jobs)
		events := 2 * jobs

		kills := killRelayUntilDelivered(t, func(t *testing.T, name string, env []string) (*proc, func() bool) {
			p := start(t, name, env, relayArgs(dbURL, m.config)...)
			return p, func() bool { return allDeliveredOn(t, st, events) }
		})
		t.Logf("%d kills", kills)
		require.Positive(t, kills)
		m.requireAppliedOnce(t, ids)
		requireJournaled(t, st, events)
	})

	t.Run("Embedded", func(t *testing.T) {
		t.Parallel()
		m := newMultiSink(t)
		dir := t.TempDir()
		st, err := storesqlite.Open(context.Background(), storesqlite.Config{DataDir: dir})
		require.NoError(t, err)
		ids := announceOn(t, st, jobs)
		st.Close() // serve locks the data directory
		events := 2 * jobs

		kills := killRelayUntilDelivered(t, func(t *testing.T, name string, env []string) (*proc, func() bool) {
			addr := freeAddr(t)
			p := start(t, name, env, embeddedServeArgs(dir, addr, nil, "", "--config", m.config,
				"--relay-lease-duration", "1s", "--relay-poll-interval", "20ms", "--relay-batch-size", "5")...)
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			return p, func() bool { return allDeliveredRPC(t, oncejobv1.NewDeliveryServiceClient(conn), events) }
		})
		t.Logf("%d kills", kills)
		require.Positive(t, kills)
		m.requireAppliedOnce(t, ids)
		requireJournaled(t, openEmbedded(t, dir), events)
	})
}

// allDeliveredOn is allDelivered of tenant default's deliveries in st.
func allDeliveredOn(t *testing.T, st store.DeliveryStore, events int) bool {
	t.Helper()
	list, err := st.DeliveryList(context.Background(), &store.DeliveryListParams{Tenant: "default", Limit: 10000})
	require.NoError(t, err)
	var ds []deliveryState
	for _, d := range list.Deliveries {
		ds = append(ds, deliveryState{sink: d.Sink, delivered: d.Status == store.DeliveryStatusDelivered})
	}
	return allDelivered(ds, events)
}

// allDeliveredRPC is allDelivered through ListDeliveries; a server not
// serving (yet) answers false.
func allDeliveredRPC(t *testing.T, c oncejobv1.DeliveryServiceClient, events int) bool {
	t.Helper()
	var ds []deliveryState
	token := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := c.ListDeliveries(ctx, &oncejobv1.ListDeliveriesRequest{PageSize: 500, PageToken: token})
		cancel()
		if err != nil {
			return false
		}
		for _, d := range resp.GetDeliveries() {
			ds = append(ds, deliveryState{sink: d.GetSink(), delivered: d.GetStatus() == oncejobv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED})
		}
		if token = resp.GetNextPageToken(); token == "" {
			return allDelivered(ds, events)
		}
	}
}

// TestRelayThatCannotClaimIsNotReady: a relay whose claims fail (here its
// store refuses the claim's update, which routing does not make, while
// pings still succeed) says so
// where an operator looks - /readyz answers 503 with the claim's error,
// oncejob_relay_round_failures_total{step="claim"} counts the rounds, and
// serve's JobService health is NOT_SERVING - and, once the claims work
// again, it delivers and is ready again: the relay process on its
// --metrics-addr, and serve on its HTTP address.
func TestRelayThatCannotClaimIsNotReady(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"relay", "serve"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newEffects(t)
			config := e.config(t, "")
			ids := e.announce(t, 1)
			ctx := context.Background()
			_, err := e.store.Pool().Exec(ctx, `CREATE FUNCTION claim_refused() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'claim refused by the test'; END $$;
				CREATE TRIGGER claim_refused BEFORE UPDATE OF lease_owner ON deliveries
				FOR EACH ROW WHEN (NEW.lease_owner IS NOT NULL) EXECUTE FUNCTION claim_refused()`)
			require.NoError(t, err)

			httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
			var p *proc
			if kind == "relay" {
				p = start(t, "relay", nil, relayArgs(e.dbURL, config, "--metrics-addr", httpAddr)...)
			} else {
				p = start(t, "serve", nil, "serve", "--database-url", e.dbURL, "--workers", "0", "--grpc-addr", grpcAddr,
					"--http-addr", httpAddr, "--config", config, "--relay-poll-interval", "20ms")
			}
			readyz := func() (int, string) {
				resp, err := http.Get("http://" + httpAddr + "/readyz")
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			var code int
			var body string
			require.Eventually(t, func() bool {
				code, body = readyz()
				return code == http.StatusServiceUnavailable
			}, 30*time.Second, 20*time.Millisecond, "readyz: %d %s", code, body)
			require.Contains(t, body, "not ready: relay: claim failed in every round since ")
			require.Contains(t, body, "claim refused by the test", "the store's error, not only that it failed")
			require.Eventually(t, func() bool {
				return sumByLabel(scrape(t, "http://"+httpAddr+"/metrics"), "oncejob_relay_round_failures_total", "step", "claim") >= 2
			}, 30*time.Second, 20*time.Millisecond)
			if kind == "serve" {
				require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, jobServiceHealth(t, grpcAddr))
			}
			require.False(t, e.allDelivered(t, 2*len(ids)))

			_, err = e.store.Pool().Exec(ctx, `DROP TRIGGER claim_refused ON deliveries`)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return e.allDelivered(t, 2*len(ids)) }, 30*time.Second, 20*time.Millisecond)
			require.Eventually(t, func() bool {
				code, body = readyz()
				return code == http.StatusOK
			}, 30*time.Second, 20*time.Millisecond, "readyz: %d %s", code, body)
			if kind == "serve" {
				require.Eventually(t, func() bool { return jobServiceHealth(t, grpcAddr) == healthpb.HealthCheckResponse_SERVING }, 30*time.Second, 20*time.Millisecond)
			}
			p.stop()
		})
	}
}

func jobServiceHealth(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: oncejobv1.JobService_ServiceDesc.ServiceName})
	require.NoError(t, err)
	return resp.GetStatus()
}
