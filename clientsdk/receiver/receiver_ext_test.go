package receiver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/oncejob/oncejob/clientsdk/receiver"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

const body = `{"version": 1, "type": "job.succeeded", "id": "job:6f1c:job.succeeded:0", "time": "2026-12-03T00:00:00.000000Z", "data": {"job_id": "6f1c", "tenant": "acme", "status": "succeeded", "output": {"total": 42}}}`

// signed is a request as the relay sends it, signed with secrets at ts.
func signed(t *testing.T, ts time.Time, payload string, secrets ...string) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewBufferString(payload))
	var sigs []string
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		sig, err := wh.Sign("job:6f1c:job.succeeded:0", ts, []byte(payload))
		require.NoError(t, err)
		sigs = append(sigs, sig)
	}
	req.Header.Set("webhook-id", "job:6f1c:job.succeeded:0")
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", joinSpace(sigs))
	return req
}

func joinSpace(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}

// countingInbox applies in memory and counts effects.
type countingInbox struct {
	mu      sync.Mutex
	applied map[string]int
}

func (c *countingInbox) Apply(_ context.Context, e *receiver.Event) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied == nil {
		c.applied = map[string]int{}
	}
	if c.applied[e.ID] > 0 {
		return "r", false, nil
	}
	c.applied[e.ID]++
	return "r", true, nil
}

// TestVerify: a tampered body, a wrong secret, a stale (or future)
// timestamp and missing headers are rejected with 401 and apply nothing; a
// request signed during a rotation (old and new secret) is accepted by a
// receiver that knows either one.
func TestVerify(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := newSecret(t), newSecret(t)
	now := time.Now()
	cases := []struct {
		name      string
		req       *http.Request
		receiver  []string
		wantCode  int
		wantApply bool
	}{
		{"valid", signed(t, now, body, oldSecret), []string{oldSecret}, 200, true},
		{"tampered body", func() *http.Request {
			r := signed(t, now, body, oldSecret)
			r.Body = httpBody(body[:len(body)-2] + `43}}`)
			return r
		}(), []string{oldSecret}, 401, false},
		{"wrong secret", signed(t, now, body, newSecret), []string{oldSecret}, 401, false},
		{"stale timestamp", signed(t, now.Add(-6*time.Minute), body, oldSecret), []string{oldSecret}, 401, false},
		{"future timestamp", signed(t, now.Add(6*time.Minute), body, oldSecret), []string{oldSecret}, 401, false},
		{"no signature", func() *http.Request {
			r := signed(t, now, body, oldSecret)
			r.Header.Del("webhook-signature")
			return r
		}(), []string{oldSecret}, 401, false},
		{"rotation: signed with both, receiver knows the old", signed(t, now, body, newSecret, oldSecret), []string{oldSecret}, 200, true},
		{"rotation: signed with both, receiver knows the new", signed(t, now, body, newSecret, oldSecret), []string{newSecret}, 200, true},
		{"rotation: receiver knows both, signed with the old", signed(t, now, body, oldSecret), []string{newSecret, oldSecret}, 200, true},
		{"not an event", signed(t, now, `{"hello": 1}`, oldSecret), []string{oldSecret}, 400, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := receiver.NewVerifier(c.receiver...)
			require.NoError(t, err)
			inbox := &countingInbox{}
			rec := httptest.NewRecorder()
			receiver.NewHandler(v, inbox).ServeHTTP(rec, c.req)
			require.Equal(t, c.wantCode, rec.Code, rec.Body.String())
			require.Equal(t, c.wantApply, len(inbox.applied) == 1)
		})
	}
}

func httpBody(s string) *nopCloser { return &nopCloser{bytes.NewBufferString(s)} }

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// TestPgxInboxAppliesOnce: concurrent deliveries of one event run the
// effect once; every one is answered 200 with the first's receipt.
func TestPgxInboxAppliesOnce(t *testing.T) {
	t.Parallel()
	pool := storepgtest.NewTestPool(t)
	_, err := pool.Exec(t.Context(), `CREATE TABLE effects (id bigserial PRIMARY KEY, event_id text NOT NULL)`)
	require.NoError(t, err)
	inbox, err := receiver.NewPgxInbox(pool, "", func(ctx context.Context, tx pgx.Tx, e *receiver.Event) (string, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO effects (event_id) VALUES ($1) RETURNING id`, e.ID).Scan(&id)
		return "effect-" + strconv.FormatInt(id, 10), err
	})
	require.NoError(t, err)
	require.NoError(t, inbox.CreateTable(t.Context()))
	requireAppliesOnce(t, inbox, func() int {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM effects`).Scan(&n))
		return n
	})
}

// TestSQLInboxAppliesOnce: the same through database/sql on SQLite.
func TestSQLInboxAppliesOnce(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "r.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE TABLE effects (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL)`)
	require.NoError(t, err)
	inbox, err := receiver.NewSQLInbox(db, "sqlite", "inbox", func(ctx context.Context, tx *sql.Tx, e *receiver.Event) (string, error) {
		res, err := tx.ExecContext(ctx, `INSERT INTO effects (event_id) VALUES (?)`, e.ID)
		if err != nil {
			return "", err
		}
		id, _ := res.LastInsertId()
		return "effect-" + strconv.FormatInt(id, 10), nil
	})
	require.NoError(t, err)
	require.NoError(t, inbox.CreateTable(t.Context()))
	requireAppliesOnce(t, inbox, func() int {
		var n int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM effects`).Scan(&n))
		return n
	})
}

func requireAppliesOnce(t *testing.T, inbox receiver.Applier, effects func() int) {
	t.Helper()
	secret := newSecret(t)
	v, err := receiver.NewVerifier(secret)
	require.NoError(t, err)
	srv := httptest.NewServer(receiver.NewHandler(v, inbox))
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	var ok atomic.Int32
	receipts := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			req := signed(t, time.Now(), body, secret)
			out, err := http.NewRequest(http.MethodPost, srv.URL, req.Body)
			if err != nil {
				return
			}
			out.Header = req.Header
			resp, err := http.DefaultClient.Do(out)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
				receipts <- resp.Header.Get(receiver.ReceiptHeader)
			}
		})
	}
	wg.Wait()
	close(receipts)
	require.EqualValues(t, 16, ok.Load(), "every delivery answered 2xx")
	require.Equal(t, 1, effects(), "the effect ran once")
	first := <-receipts
	require.Regexp(t, `^effect-\d+$`, first)
	for r := range receipts {
		require.Equal(t, first, r, "every delivery gets the first's receipt")
	}
}
