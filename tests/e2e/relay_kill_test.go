package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storetest"
)

// effects is a relay's world in a test: the oncejob schema, and the example
// receiver (examples/receiver, the real binary) on a schema of its own.
type effects struct {
	dbURL    string
	store    *storepg.Store
	secret   string
	recvURL  string // the receiver's HTTP address
	recvDB   *pgxpool.Pool
	receiver *proc
}

func newEffects(t *testing.T) *effects {
	t.Helper()
	e := &effects{dbURL: storepgtest.NewMigratedSchemaURL(t)}
	var err error
	e.store, err = storepg.Open(context.Background(), e.dbURL)
	require.NoError(t, err)
	t.Cleanup(e.store.Close)

	key := make([]byte, 24)
	_, _ = rand.Read(key)
	e.secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
	recvDBURL := storepgtest.NewSchemaURL(t)
	addr := freeAddr(t)
	e.receiver = startBinary(t, "receiver", []string{"WEBHOOK_SECRETS=" + e.secret}, "receiver", "--addr", addr, "--database-url", recvDBURL)
	e.recvURL = "http://" + addr
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "the receiver never listened")
	e.recvDB, err = pgxpool.New(context.Background(), recvDBURL)
	require.NoError(t, err)
	t.Cleanup(e.recvDB.Close)
	return e
}

// config writes the relay's config file: one webhook sink to the receiver
// and the given extra sinks (YAML list items).
func (e *effects) config(t *testing.T, extra string) string {
	t.Helper()
	secretPath := writeFile(t, "secret", e.secret)
	return writeFile(t, "oncejob.yaml", fmt.Sprintf(`
sinks:
  - name: hook
    tenant: default
    events: [job.succeeded, job.failed]
    retry: {initial_backoff: 50ms, max_backoff: 200ms, max_attempts: 1000}
    webhook:
      url: %s
      secret: {file: %s}
      timeout: 5s
      allow_private_network: true
%s`, e.recvURL, secretPath, extra))
}

// announce makes n jobs announce job.failed, then (replayed) job.succeeded,
// straight through the store: 2n events.
func (e *effects) announce(t *testing.T, n int) []string { return announceOn(t, e.store, n) }

// announcer is a store that jobs can be made to announce events through.
type announcer interface {
	store.Store
	store.EngineStore
	store.OperatorStore
}

// announceOn is announce on any store (the embedded one too): 2n events,
// each job's failure before its success.
func announceOn(t *testing.T, st announcer, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range n {
		ids[i] = newJobOn(t, st)
		lease := claimOn(t, st, ids[i])
		_, err := st.JobTransition(ctx, &store.JobTransitionParams{Lease: lease, To: store.JobStatusFailed, Error: &store.JobError{Code: "BAD", Message: "bad"}})
		require.NoError(t, err)
		_, err = st.JobReplay(ctx, &store.JobReplayParams{Tenant: "default", ID: ids[i]})
		require.NoError(t, err)
		_, err = storetest.Publish(ctx, st, &store.JobPublishParams{Lease: claimOn(t, st, ids[i]), Output: []byte(`{"n": 1}`), Message: "published"})
		require.NoError(t, err)
	}
	return ids
}

// deadLetter makes n jobs announce job.dead_lettered.
func (e *effects) deadLetter(t *testing.T, n int) {
	t.Helper()
	for range n {
		id := e.newJob(t)
		_, err := e.store.JobTransition(context.Background(), &store.JobTransitionParams{
			Lease: e.claim(t, id), To: store.JobStatusDeadLettered, Error: &store.JobError{Code: "BUDGET_SPENT", Message: "attempts spent"},
		})
		require.NoError(t, err)
	}
}

func (e *effects) newJob(t *testing.T) string { return newJobOn(t, e.store) }

func (e *effects) claim(t *testing.T, id string) store.Lease { return claimOn(t, e.store, id) }

// newJobOn submits a queued job of tenant default.
func newJobOn(t *testing.T, st store.Store) string {
	t.Helper()
	doc := []byte("doc " + uuid.NewString())
	sum := sha256.Sum256(doc)
	key := uuid.NewString()
	res, err := st.JobSubmit(context.Background(), &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: "default", Method: "/oncejob.v1.JobService/SubmitJob", IdempotencyKey: key,
		Fingerprint: "fp-" + key, DedupKey: "dedup:v1:" + key, Pipeline: "summarize", PipelineVersion: 1,
		PromptVersion: "1", ModelProfile: "default", Document: doc, DocumentSHA256: hex.EncodeToString(sum[:]),
		DocumentMedia: "text/plain", Params: []byte(`{}`),
	})
	require.NoError(t, err)
	return res.Job.ID
}

// claimOn claims the one runnable job, which must be id.
func claimOn(t *testing.T, st store.EngineStore, id string) store.Lease {
	t.Helper()
	jobs, err := st.JobClaim(context.Background(), &store.JobClaimParams{Owner: "test", Limit: 1, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, id, jobs[0].ID)
	return store.Lease{JobID: id, Owner: jobs[0].LeaseOwner, Attempt: jobs[0].Attempt}
}

// allDelivered reports whether the tenant has n deliveries, all delivered.
func (e *effects) allDelivered(t *testing.T, n int) bool {
	t.Helper()
	var total, delivered int
	params := &store.DeliveryListParams{Tenant: "default", Limit: 1000}
	for {
		page, err := e.store.DeliveryList(context.Background(), params)
		require.NoError(t, err)
		for _, d := range page.Deliveries {
			total++
			if d.Status == store.DeliveryStatusDelivered {
				delivered++
			}
		}
		if page.Next == nil {
			return total == n && delivered == n
		}
		params.After = page.Next
	}
}

// requireAppliedOnceInOrder checks the receiver's effects: every event of
// jobs applied exactly once, each job's failure before its success; and the
// journal: every delivery delivered at least once.
func (e *effects) requireAppliedOnceInOrder(t *testing.T, jobs []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := e.recvDB.Query(ctx, `SELECT event_id, event_type, job_id FROM receiver_effects ORDER BY id`)
	require.NoError(t, err)
	applied := map[string]int{}
	order := map[string][]string{}
	for rows.Next() {
		var id, typ, job string
		require.NoError(t, rows.Scan(&id, &typ, &job))
		applied[id]++
		order[job] = append(order[job], typ)
	}
	require.NoError(t, rows.Err())
	require.Len(t, applied, 2*len(jobs), "every event applied")
	for id, n := range applied {
		require.Equal(t, 1, n, "event %s applied %d times", id, n)
	}
	for _, job := range jobs {
		require.Equal(t, []string{"job.failed", "job.succeeded"}, order[job], "job %s: order at the receiver", job)
	}
	list, err := e.store.DeliveryList(ctx, &store.DeliveryListParams{Tenant: "default", Limit: 100000})
	require.NoError(t, err)
	for _, d := range list.Deliveries {
		journal, err := e.store.DeliveryAttemptList(ctx, &store.DeliveryAttemptListParams{DeliveryID: d.ID})
		require.NoError(t, err)
		delivered := 0
		for _, a := range journal {
			if a.Outcome == store.DeliveryOutcomeDelivered {
				delivered++
				require.Regexp(t, `^effect-\d+$`, a.ExternalRef, "the receiver's receipt is journaled")
			}
		}
		require.Positive(t, delivered, "delivery %d: the journal shows it delivered", d.ID)
	}
}

func relayArgs(dbURL, config string, extra ...string) []string {
	return append([]string{
		"relay", "--database-url", dbURL, "--config", config, "--relay-lease-duration", "1s",
		"--relay-poll-interval", "20ms", "--relay-batch-size", "5", "--log-level", "debug",
	}, extra...)
}

// TestRelayKillAtFailpoints SIGKILLs the real relay at each of its
// failpoints - before the send; after the receiver committed, before the
// journal row; after the journal row - at the first hit and then at random
// hits, restarting it until every event is delivered: the example receiver
// applied each event exactly once (its effect count), in order per job, and
// the journal shows each delivered at least once.
func TestRelayKillAtFailpoints(t *testing.T) {
	t.Parallel()
	for _, fp := range []string{"relay_before_send", "relay_after_send", "relay_after_journal"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			e := newEffects(t)
			config := e.config(t, "")
			jobs := e.announce(t, 10)
			kills := 0
			for round := 0; ; round++ {
				require.Less(t, round, 60, "events not delivered after %d kills", kills)
				var env []string
				switch {
				case round == 0:
					env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill"}
				case round < 20:
					env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill%30"}
				}
				r := start(t, fmt.Sprintf("relay-%d", round), env, relayArgs(e.dbURL, config)...)
				for !r.done() && !e.allDelivered(t, 2*len(jobs)) {
					time.Sleep(20 * time.Millisecond)
				}
				if !r.done() {
					// Still armed: it may hit its failpoint while it drains.
					r.stopOrDieAt("failpoint: " + fp)
					break
				}
				require.Contains(t, r.logs.String(), "failpoint: "+fp, "the relay died, but not at the failpoint")
				kills++
			}
			t.Logf("%s: %d kills", fp, kills)
			require.Positive(t, kills)
			e.requireAppliedOnceInOrder(t, jobs)
		})
	}
}

// TestTwoRelaysDeliverEveryEvent: two relay processes on one Postgres
// deliver 2,000 events (1,000 jobs, each failed then succeeded, announced
// while the relays run; 10,000 events under -e2e.big) to the example
// receiver: none lost, none applied twice, each job's order kept, and both
// relays delivered. With claims of 100, 2,000 events are 20 claims the two
// race for, as 10,000 are 100.
func TestTwoRelaysDeliverEveryEvent(t *testing.T) {
	t.Parallel()
	e := newEffects(t)
	config := e.config(t, "")
	a := start(t, "relay-a", nil, append(relayArgs(e.dbURL, config), "--relay-batch-size", "100", "--log-level", "info")...)
	b := start(t, "relay-b", nil, append(relayArgs(e.dbURL, config), "--relay-batch-size", "100", "--log-level", "info")...)
	jobs := sized(1000, 5000)
	started := time.Now()
	ids := e.announceBulk(t, jobs)
	require.Eventually(t, func() bool { return e.allDelivered(t, 2*jobs) }, 3*time.Minute, 500*time.Millisecond)
	t.Logf("announced and delivered in %s", time.Since(started))
	a.stop()
	b.stop()
	e.requireAppliedOnceInOrder(t, ids)
	var byRelay int
	require.NoError(t, e.store.Pool().QueryRow(context.Background(), `SELECT count(DISTINCT relay) FROM (SELECT relay FROM delivery_attempts
		UNION ALL SELECT landed::jsonb->>'relay' FROM deliveries WHERE landed <> '') AS a`).Scan(&byRelay))
	require.Equal(t, 2, byRelay, "both relays delivered")
}

// announceBulk makes jobs announce job.failed then job.succeeded in batches
// of 250 jobs, one statement per step, as fast as the database allows: the
// triggers write the outbox events as the engine's transitions would.
func (e *effects) announceBulk(t *testing.T, jobs int) []string {
	t.Helper()
	ctx := context.Background()
	pool := e.store.Pool()
	_, err := pool.Exec(ctx, `INSERT INTO documents (tenant, sha256, media_type, data, size_bytes) VALUES ('default', 'bulk', 'text/plain', 'x', 1)`)
	require.NoError(t, err)
	var ids []string
	for done := 0; done < jobs; done += 250 {
		batch := make([]string, min(250, jobs-done))
		for i := range batch {
			batch[i] = uuid.NewString()
		}
		_, err := pool.Exec(ctx, `INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status, error, document_sha256, document_media_type, document_size_bytes)
			SELECT id::uuid, 'default', 'k-' || id, 'd-' || id, 'summarize', 1, 'failed', '{"code": "BAD", "message": "bad"}', 'bulk', 'text/plain', 1
			FROM unnest($1::text[]) AS id`, batch)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `UPDATE jobs SET status = 'queued' WHERE id = ANY($1::uuid[])`, batch)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `UPDATE jobs SET status = 'succeeded', output = '{"n": 1}', updated_at = now() WHERE id = ANY($1::uuid[])`, batch)
		require.NoError(t, err)
		ids = append(ids, batch...)
	}
	return ids
}

// chatServer is a Slack-compatible incoming webhook that counts messages.
type chatServer struct {
	mu    sync.Mutex
	posts map[string]int
}

func newChatServer(t *testing.T) (*chatServer, string) {
	c := &chatServer{posts: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		c.mu.Lock()
		c.posts[body.Text]++
		n := len(c.posts)
		c.mu.Unlock()
		fmt.Fprintf(w, `{"ok": true, "ts": "1700000000.%06d"}`, n)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *chatServer) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.posts {
		out[k] = v
	}
	return out
}

// chatConfig is a chat sink of dead letters; its URL, a secret, comes from
// ONCEJOB_TEST_CHAT_URL.
const chatConfig = `  - name: ops
    tenant: default
    events: [job.dead_lettered]
    retry: {initial_backoff: 50ms, max_backoff: 200ms}
    chat:
      url: {env: ONCEJOB_TEST_CHAT_URL}
      allow_private_network: true
`

// TestRelayChatNotifiesOnceAcrossRestart: the relay dies after the chat
// post and its sent_messages row, before the journal; restarted, it finds
// the row and posts nothing: each dead letter is notified once.
func TestRelayChatNotifiesOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	e := newEffects(t)
	chat, url := newChatServer(t)
	config := e.config(t, chatConfig)
	env := []string{"ONCEJOB_TEST_CHAT_URL=" + url}
	e.deadLetter(t, 3)

	r := start(t, "relay-killed", append(env, "ONCEJOB_FAILPOINTS=relay_after_send=kill"), relayArgs(e.dbURL, config)...)
	<-r.exited
	require.Contains(t, r.logs.String(), "failpoint: relay_after_send")
	require.NotEmpty(t, chat.counts(), "the relay posted before it died")

	r = start(t, "relay", env, relayArgs(e.dbURL, config)...)
	require.Eventually(t, func() bool { return e.allDelivered(t, 3) }, 30*time.Second, 20*time.Millisecond)
	r.stop()
	posts := chat.counts()
	require.Len(t, posts, 3)
	for text, n := range posts {
		require.Equal(t, 1, n, "notified %d times: %s", n, text)
	}
}

// TestRelayKillAtChatWindow kills the relay inside the chat sink's
// remaining window - after the post, before its sent_messages row - and
// shows what the documented window costs: that message is posted twice,
// and only that one.
func TestRelayKillAtChatWindow(t *testing.T) {
	t.Parallel()
	e := newEffects(t)
	chat, url := newChatServer(t)
	config := e.config(t, chatConfig)
	env := []string{"ONCEJOB_TEST_CHAT_URL=" + url}
	e.deadLetter(t, 3)

	r := start(t, "relay-killed", append(env, "ONCEJOB_FAILPOINTS=chat_after_post=kill"), relayArgs(e.dbURL, config, "--relay-batch-size", "1")...)
	<-r.exited
	require.Contains(t, r.logs.String(), "failpoint: chat_after_post")
	r = start(t, "relay", env, relayArgs(e.dbURL, config)...)
	require.Eventually(t, func() bool { return e.allDelivered(t, 3) }, 30*time.Second, 20*time.Millisecond)
	r.stop()
	posts := chat.counts()
	require.Len(t, posts, 3)
	twice := 0
	for _, n := range posts {
		require.LessOrEqual(t, n, 2)
		if n == 2 {
			twice++
		}
	}
	require.Equal(t, 1, twice, "the message in the window was posted again; the others once")
	t.Logf("a kill inside the window (post done, record not written) posted 1 of 3 messages twice: %v", posts)
}
