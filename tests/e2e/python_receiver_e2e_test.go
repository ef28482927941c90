package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/oncejob/oncejob/clientsdk/receiver"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// pyReceiver is the Python example receiver (examples/python/receiver.py
// on oncejob.receiver) as a real HTTP server on its own database.
type pyReceiver struct {
	addr, secret string
	dbArgs       []string
	// applied reads the receiver's effects (event id, type, job, in the
	// order applied) and its inbox (event id -> receipt).
	applied func(t *testing.T) (effects [][3]string, inbox map[string]string)
}

func newPyReceiver(t *testing.T, db string) *pyReceiver {
	t.Helper()
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	r := &pyReceiver{addr: freeAddr(t), secret: "whsec_" + base64.StdEncoding.EncodeToString(key)}
	ctx := context.Background()
	switch db {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "receiver.db")
		r.dbArgs = []string{"--sqlite", path}
		r.applied = func(t *testing.T) ([][3]string, map[string]string) {
			conn, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
			require.NoError(t, err)
			defer conn.Close()
			return readApplied(t, func(q string) (scanner, error) {
				rows, err := conn.QueryContext(ctx, q)
				return sqlRows{rows}, err
			})
		}
	case "postgres":
		// The schema as libpq (psycopg2) takes it: options=-c search_path=.
		schemaURL := storepgtest.NewSchemaURL(t)
		u, err := url.Parse(schemaURL)
		require.NoError(t, err)
		q := u.Query()
		q.Set("options", "-c search_path="+q.Get("search_path"))
		q.Del("search_path")
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq reads no + as a space
		r.dbArgs = []string{"--database-url", u.String()}
		pool, err := pgxpool.New(ctx, schemaURL)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		r.applied = func(t *testing.T) ([][3]string, map[string]string) {
			return readApplied(t, func(q string) (scanner, error) { return pool.Query(ctx, q) })
		}
	}
	return r
}

type scanner interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func readApplied(t *testing.T, query func(string) (scanner, error)) ([][3]string, map[string]string) {
	t.Helper()
	read := func(q string, n int) [][]string {
		rows, err := query(q)
		require.NoError(t, err)
		defer rows.Close()
		var out [][]string
		for rows.Next() {
			row := make([]string, n)
			dest := make([]any, n)
			for i := range row {
				dest[i] = &row[i]
			}
			require.NoError(t, rows.Scan(dest...))
			out = append(out, row)
		}
		require.NoError(t, rows.Err())
		return out
	}
	var effects [][3]string
	for _, r := range read(`SELECT event_id, event_type, job_id FROM receiver_effects ORDER BY id`, 3) {
		effects = append(effects, [3]string{r[0], r[1], r[2]})
	}
	inbox := map[string]string{}
	for _, r := range read(`SELECT event_id, receipt FROM oncejob_inbox`, 2) {
		inbox[r[0]] = r[1]
	}
	return effects, inbox
}

// start runs the receiver and waits until it listens.
func (r *pyReceiver) start(t *testing.T, name string) *proc {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	p := startCommand(t, name, []string{"WEBHOOK_SECRETS=" + r.secret, "PYTHONPATH=" + filepath.Join(root, "clientsdk/python"), "PYTHONDONTWRITEBYTECODE=1"},
		python, append([]string{filepath.Join(root, "examples/python/receiver.py"), "--addr", r.addr}, r.dbArgs...)...)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", r.addr)
		if err == nil {
			c.Close()
		}
		return err == nil || p.done()
	}, 30*time.Second, 20*time.Millisecond, "the Python receiver never listened")
	require.False(t, p.done(), "the Python receiver exited: %s", p.logs.String())
	return p
}

// TestPythonReceiverAppliesRelayDeliveriesOnce: the real relay delivers to
// the Python example receiver over HTTP, on SQLite and on Postgres. The
// relay is SIGKILLed right after the receiver committed (relay_after_send),
// so those events are not journaled; the receiver is SIGKILLed too and a
// new Python process started on the same database; the restarted relay
// delivers those events again. Each event is applied once, in order per
// job, and the journal's receipt of every delivery is the receipt the
// inbox recorded when it first applied it - the redelivery was answered
// 200 with it.
func TestPythonReceiverAppliesRelayDeliveriesOnce(t *testing.T) {
	t.Parallel()
	requirePython(t)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			rcv := newPyReceiver(t, db)
			recv := rcv.start(t, "py-receiver-1")
			e := &effects{dbURL: storepgtest.NewMigratedSchemaURL(t), secret: rcv.secret, recvURL: "http://" + rcv.addr}
			var err error
			e.store, err = storepg.Open(context.Background(), e.dbURL)
			require.NoError(t, err)
			t.Cleanup(e.store.Close)
			config := e.config(t, "")
			jobs := e.announce(t, 3)

			r := start(t, "relay-armed", []string{"ONCEJOB_FAILPOINTS=relay_after_send=kill"}, relayArgs(e.dbURL, config)...)
			require.Eventually(t, r.done, 60*time.Second, 20*time.Millisecond, "the armed relay never reached its failpoint")
			require.Contains(t, r.logs.String(), "failpoint: relay_after_send")
			applied, _ := rcv.applied(t)
			require.NotEmpty(t, applied, "the receiver committed before the relay died")
			require.False(t, e.allDelivered(t, 2*len(jobs)), "the killed relay journaled nothing it sent last")

			recv.signal(syscall.SIGKILL)
			<-recv.exited
			rcv.start(t, "py-receiver-2")
			r = start(t, "relay", nil, relayArgs(e.dbURL, config)...)
			require.Eventually(t, func() bool { return e.allDelivered(t, 2*len(jobs)) }, 60*time.Second, 20*time.Millisecond)
			r.stop()

			effects, inbox := rcv.applied(t)
			seen := map[string]int{}
			order := map[string][]string{}
			for _, eff := range effects {
				seen[eff[0]]++
				order[eff[2]] = append(order[eff[2]], eff[1])
			}
			require.Len(t, seen, 2*len(jobs), "every event applied")
			for id, n := range seen {
				require.Equal(t, 1, n, "event %s applied %d times", id, n)
			}
			for _, job := range jobs {
				require.Equal(t, []string{"job.failed", "job.succeeded"}, order[job], "job %s: order at the receiver", job)
			}
			list, err := e.store.DeliveryList(context.Background(), &store.DeliveryListParams{Tenant: "default", Limit: 100})
			require.NoError(t, err)
			require.Len(t, list.Deliveries, 2*len(jobs))
			for _, d := range list.Deliveries {
				journal, err := e.store.DeliveryAttemptList(context.Background(), &store.DeliveryAttemptListParams{DeliveryID: d.ID})
				require.NoError(t, err)
				require.NotEmpty(t, journal)
				last := journal[len(journal)-1]
				require.Equal(t, store.DeliveryOutcomeDelivered, last.Outcome)
				require.Regexp(t, `^effect-\d+$`, inbox[d.EventID])
				require.Equal(t, inbox[d.EventID], last.ExternalRef, "%s: the journaled receipt is the inbox's", d.EventID)
			}
		})
	}
}

// receiverCase is one request for both receivers: the Go verdict, to be
// matched by the Python one.
type receiverCase struct {
	Secrets []string          `json:"secrets"`
	Headers map[string][]byte `json:"headers"` // as on the wire
	Body    []byte            `json:"body"`
	Verify  string            `json:"verify"` // ok, missing_headers, stale, signature
	EventID *string           `json:"event_id"`
}

// TestPythonReceiverAgreesWithGo: thousands of seeded random requests -
// timestamps in every spelling ParseInt may or may not take, near and past
// the tolerance; signatures of the right, another or no secret, mutated,
// several with odd separators; envelopes whose fields take every JSON type
// and int bound, with renamed and repeated names, and random bytes - get
// the same verdict (accepted, or refused for the same reason) and the same
// parsed event id from the Go receiver and from oncejob.receiver. The seed
// is logged; ONCEJOB_TEST_SEED repeats a run.
func TestPythonReceiverAgreesWithGo(t *testing.T) {
	t.Parallel()
	requirePython(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ONCEJOB_TEST_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (ONCEJOB_TEST_SEED=%d repeats it)", seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, 19))
	const now = 1796256000
	cases := make([]receiverCase, 3000)
	for i := range cases {
		cases[i] = randomReceiverCase(t, rng, now)
	}
	path := filepath.Join(t.TempDir(), "cases.json")
	b, err := json.Marshal(cases)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))

	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmd := exec.Command(python, "-c", `
import base64, json, sys
from oncejob import receiver as r
cases = json.load(open(sys.argv[1]))
names = {None: "ok", r.MissingHeadersError: "missing_headers", r.StaleError: "stale", r.SignatureError: "signature"}
out = []
for c in cases:
    v = r.Verifier(*c["secrets"], now=lambda: int(sys.argv[2]))
    headers = {k: base64.b64decode(x) for k, x in c["headers"].items()}
    body = base64.b64decode(c["body"])
    try:
        v.verify(headers, body)
        verdict = None
    except r.VerificationError as e:
        verdict = type(e)
    try:
        event_id = r.parse_event(body).id
    except r.EventError:
        event_id = None
    out.append({"verify": names[verdict], "event_id": event_id})
json.dump(out, sys.stdout)
`, path, strconv.Itoa(now))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "clientsdk/python"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	var got []struct {
		Verify  string  `json:"verify"`
		EventID *string `json:"event_id"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	require.Len(t, got, len(cases))
	verdicts := map[string]int{}
	parsed := 0
	for i, c := range cases {
		verdicts[c.Verify]++
		if c.EventID != nil {
			parsed++
		}
		if got[i].Verify != c.Verify || (got[i].EventID == nil) != (c.EventID == nil) || (c.EventID != nil && *got[i].EventID != *c.EventID) {
			in, _ := json.Marshal(c)
			out, _ := json.Marshal(got[i])
			t.Errorf("case %d (seed %d): Go %s, Python %s", i, seed, in, out)
		}
	}
	t.Logf("verdicts %v, %d bodies read as events", verdicts, parsed)
	for _, v := range []string{"ok", "missing_headers", "stale", "signature"} {
		require.Positive(t, verdicts[v], "the generator made no %s case", v)
	}
	require.Positive(t, parsed)
	require.Less(t, parsed, len(cases))
}

func randomReceiverCase(t *testing.T, rng *mrand.Rand, now int64) receiverCase {
	t.Helper()
	secret := func() string {
		k := make([]byte, 1+rng.IntN(64))
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		return "whsec_" + base64.StdEncoding.EncodeToString(k)
	}
	c := receiverCase{Secrets: []string{secret()}, Headers: map[string][]byte{}}
	if rng.IntN(3) == 0 {
		c.Secrets = append(c.Secrets, secret()) // a rotation
	}
	c.Body = randomEnvelope(rng)
	id := []string{"job:1:job.succeeded:0", "é-ü", "a b", "job:\u00ff:x", "", "x\u2028y"}[rng.IntN(6)]
	if rng.IntN(4) != 0 {
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(c.Body, &e) == nil && e.ID != "" {
			id = e.ID
		}
	}
	secs := now + int64(rng.IntN(801)-400)
	if rng.IntN(4) == 0 {
		secs = now + []int64{-301, -300, 300, 301, -86400, 1 << 40}[rng.IntN(6)]
	}
	ts := strconv.FormatInt(secs, 10)
	switch rng.IntN(12) {
	case 0:
		ts = "+" + ts
	case 1:
		ts = "000" + ts
	case 2:
		ts = []string{" " + ts, ts + " ", ts + ".0", "0x10", "1_796_256_000", "\uff11\uff17", "", "-", "+", "99999999999999999999", "-9223372036854775808", "1e9"}[rng.IntN(12)]
	}
	signer := c.Secrets[rng.IntN(len(c.Secrets))]
	if rng.IntN(5) == 0 {
		signer = secret()
	}
	wh, err := standardwebhooks.NewWebhook(signer)
	require.NoError(t, err)
	sig, err := wh.Sign(id, time.Unix(secs, 0), c.Body)
	require.NoError(t, err)
	switch rng.IntN(8) {
	case 0:
		sig = sig[:rng.IntN(len(sig))]
	case 1:
		j := rng.IntN(len(sig))
		sig = sig[:j] + string(rune('A'+rng.IntN(26))) + sig[j+1:]
	case 2:
		sig = "v2,AAAA " + sig
	case 3:
		sig = "v1,AAAA" + []string{" ", "  ", ","}[rng.IntN(3)] + sig
	}
	set := func(k, v string) {
		if rng.IntN(30) != 0 { // sometimes the header is missing
			c.Headers[[]string{k, strings.ToUpper(k)}[rng.IntN(2)]] = []byte(v)
		}
	}
	set("webhook-id", id)
	set("webhook-timestamp", ts)
	set("webhook-signature", sig)

	v, err := receiver.NewVerifier(c.Secrets...)
	require.NoError(t, err)
	v.Now = func() time.Time { return time.Unix(now, 0) }
	h := http.Header{}
	for k, val := range c.Headers {
		h.Set(k, string(val))
	}
	switch err := v.Verify(h, c.Body); {
	case err == nil:
		c.Verify = "ok"
	case errors.Is(err, receiver.ErrMissingHeaders):
		c.Verify = "missing_headers"
	case errors.Is(err, receiver.ErrStale):
		c.Verify = "stale"
	case errors.Is(err, receiver.ErrSignature):
		c.Verify = "signature"
	default:
		t.Fatalf("Verify: %v", err)
	}
	if e, err := receiver.ParseEvent(c.Body); err == nil {
		c.EventID = &e.ID
	}
	return c
}

// randomEnvelope is an event envelope as JSON text, built by hand so that
// names may repeat or change case and values take any type or bound.
func randomEnvelope(rng *mrand.Rand) []byte {
	if rng.IntN(20) == 0 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	values := []string{`1`, `-0`, `0`, `1.0`, `1e0`, `2`, `2147483647`, `2147483648`, `-2147483648`, `-2147483649`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775809`, `true`, `false`, `null`, `"s"`, `""`,
		`"job:1:job.succeeded:0"`, `"\ud800"`, `"\u00e9\u2028"`, `[]`, `[1, "a"]`, `{}`, `{"code": "X", "retryable": true}`,
		`{"retryable": "yes"}`, `{"llm_calls": 1.5}`, `{"prompt_tokens": 9223372036854775807}`, `1e400`, `0.1`}
	value := func() string { return values[rng.IntN(len(values))] }
	object := func(fields [][2]string) string {
		parts := make([]string, 0, len(fields)+2)
		for _, f := range fields {
			if rng.IntN(25) == 0 {
				continue // dropped
			}
			name := f[0]
			switch rng.IntN(30) {
			case 0:
				name = strings.ToUpper(name)
			case 1:
				name = strings.Replace(name, "k", "\u212a", 1) // the Kelvin sign folds to k in Go
			case 2:
				name = strings.Replace(name, "s", "\u017f", 1) // so does the long s to s
			case 3:
				parts = append(parts, fmt.Sprintf("%q: %s", name, value())) // repeated
			}
			v := f[1]
			if rng.IntN(20) == 0 {
				v = value()
			}
			parts = append(parts, fmt.Sprintf("%q: %s", name, v))
		}
		if rng.IntN(5) == 0 {
			parts = append(parts, fmt.Sprintf(`"extra": %s`, value()))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	errObj := object([][2]string{{"code", `"BAD"`}, {"message", `"m"`}, {"retryable", `false`}})
	usage := object([][2]string{{"prompt_tokens", `1`}, {"completion_tokens", `2`}, {"cost_micros", `3`}, {"llm_calls", `1`}})
	data := object([][2]string{{"job_id", `"1"`}, {"tenant", `"acme"`}, {"pipeline", `"summarize"`}, {"pipeline_version", `1`},
		{"prompt_version", `"1"`}, {"model_profile", `"default"`}, {"dedup_key", `"d"`}, {"deduplicated_from", `null`},
		{"generation", `0`}, {"status", `"succeeded"`}, {"stage", `"published"`}, {"attempt", `1`}, {"output", `{"x": [1]}`},
		{"error", errObj}, {"usage", usage}})
	id := fmt.Sprintf(`"job:%d:job.succeeded:0"`, rng.IntN(1000))
	return []byte(object([][2]string{{"version", `1`}, {"type", `"job.succeeded"`}, {"id", id}, {"time", `"t"`}, {"data", data}}))
}

// TestPythonReceiverHoldsItsConnections (issue 30, finding 4): the Python
// example receiver on Postgres as a role limited to 15 connections takes
// 10,000 deliveries - 5,000 events, each twice, shuffled - from 1,000
// clients at once, each delivery on a fresh TCP connection. Before, every
// delivery's thread opened a connection of its own and never closed it:
// 500 from the 15th delivery on; and the listen backlog of 5 reset
// connections in such a burst. Every delivery is answered 200, every event
// applied once, and the role's connections, sampled from pg_stat_activity
// throughout, never pass the receiver's pool (--max-connections 10).
func TestPythonReceiverHoldsItsConnections(t *testing.T) {
	t.Parallel()
	requirePython(t)
	ctx := context.Background()
	const (
		events, copies, clients = 5000, 2, 1000
		roleLimit, poolSize     = 15, 10
	)
	rcv := newPyReceiver(t, "postgres")
	u, err := url.Parse(rcv.dbArgs[1])
	require.NoError(t, err)
	schema := strings.TrimPrefix(u.Query().Get("options"), "-c search_path=")
	admin, err := pgxpool.New(ctx, storepgtest.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	role := "pyrecv_" + strings.ToLower(rand.Text()[:10])
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d", role, roleLimit))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = admin.Exec(ctx, "DROP ROLE "+role)
	})
	_, err = admin.Exec(ctx, fmt.Sprintf("GRANT USAGE, CREATE ON SCHEMA %s TO %s", schema, role))
	require.NoError(t, err)
	u.User = url.User(role)
	rcv.dbArgs = []string{"--database-url", u.String(), "--max-connections", strconv.Itoa(poolSize)}
	rcv.start(t, "py-receiver")

	connections := func() int {
		var n int
		require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n))
		return n
	}
	stop, sampled := make(chan struct{}), make(chan []int)
	go func() {
		var seen []int
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var n int
			if admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n) == nil {
				seen = append(seen, n)
			}
			select {
			case <-stop:
				sampled <- seen
				return
			case <-tick.C:
			}
		}
	}()

	wh, err := standardwebhooks.NewWebhook(rcv.secret)
	require.NoError(t, err)
	type delivery struct {
		id   string
		body []byte
	}
	var all []delivery
	for i := range events {
		id := fmt.Sprintf("job:%08d-0000-4000-8000-000000000000:job.succeeded:0", i)
		body, err := json.Marshal(map[string]any{"version": 1, "type": "job.succeeded", "id": id, "time": "2026-12-01T00:00:00.000000Z",
			"data": map[string]any{"job_id": id[4:40], "status": "succeeded", "output": map[string]any{"n": i}}})
		require.NoError(t, err)
		for range copies {
			all = append(all, delivery{id, body})
		}
	}
	mrand.New(mrand.NewPCG(30, 4)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	work := make(chan delivery)
	answers := make(chan string, len(all))
	for range clients {
		go func() {
			for d := range work {
				req, _ := http.NewRequest(http.MethodPost, "http://"+rcv.addr+"/hook", bytes.NewReader(d.body))
				now := time.Now()
				sig, _ := wh.Sign(d.id, now, d.body)
				req.Header.Set("webhook-id", d.id)
				req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
				req.Header.Set("webhook-signature", sig)
				resp, err := client.Do(req)
				if err != nil {
					answers <- err.Error()
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					answers <- fmt.Sprintf("%d %s", resp.StatusCode, b)
					continue
				}
				answers <- "ok"
			}
		}()
	}
	for _, d := range all {
		work <- d
	}
	close(work)
	failed := map[string]int{}
	for range all {
		if a := <-answers; a != "ok" {
			failed[regexp.MustCompile(`[0-9]+`).ReplaceAllString(a[:min(len(a), 120)], "N")]++
		}
	}
	close(stop)
	seen := <-sampled
	require.Empty(t, failed, "deliveries not answered 200")

	effects, inbox := rcv.applied(t)
	require.Len(t, inbox, events)
	applied := map[string]int{}
	for _, e := range effects {
		applied[e[0]]++
	}
	require.Len(t, applied, events, "every event applied")
	for id, n := range applied {
		require.Equal(t, 1, n, "event %s applied %d times", id, n)
	}
	require.NotEmpty(t, seen)
	peak := slices.Max(seen)
	after := connections()
	t.Logf("%d deliveries; the role's connections: peak %d over %d samples, %d after", len(all), peak, len(seen), after)
	require.LessOrEqual(t, peak, poolSize, "the receiver holds its pool, not a connection per delivery")
	require.LessOrEqual(t, after, poolSize)
}
