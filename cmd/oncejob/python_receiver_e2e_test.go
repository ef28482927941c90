package main_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

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
	requirePython(t)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			rcv := newPyReceiver(t, db)
			recv := rcv.start(t, "py-receiver-1")
			e := &effects{dbURL: storepgtest.NewSchemaURL(t), secret: rcv.secret, recvURL: "http://" + rcv.addr}
			var err error
			e.store, err = storepg.Open(context.Background(), e.dbURL)
			require.NoError(t, err)
			t.Cleanup(e.store.Close)
			require.NoError(t, storepg.Migrate(context.Background(), e.store.Pool()))
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
