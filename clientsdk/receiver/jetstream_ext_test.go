package receiver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk/receiver"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// lostAck is a message whose ack never reaches the server, as when the
// consumer dies right after its commit.
type lostAck struct{ jetstream.Msg }

func (lostAck) Ack() error { return nil }

// TestJetStreamLostAckDoesNotApplyTwice: the consumer applies an event and
// its ack is lost; JetStream redelivers after AckWait; the inbox finds the
// event applied, the redelivery is only acked, and the effect ran once.
func TestJetStreamLostAckDoesNotApplyTwice(t *testing.T) {
	t.Parallel()
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
	stream, subject := "RECEIVER_TEST_"+hex.EncodeToString(b), "r"+hex.EncodeToString(b)+".acme.job.succeeded"
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Duplicates: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	msg.Header.Set(jetstream.MsgIDHeader, "job:6f1c:job.succeeded:0")
	_, err = js.PublishMsg(t.Context(), msg)
	require.NoError(t, err)

	pool := storepgtest.NewTestPool(t)
	_, err = pool.Exec(t.Context(), `CREATE TABLE effects (id bigserial PRIMARY KEY, event_id text NOT NULL)`)
	require.NoError(t, err)
	inbox, err := receiver.NewPgxInbox(pool, "", func(ctx context.Context, tx pgx.Tx, e *receiver.Event) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, e.ID)
		return e.ID, err
	})
	require.NoError(t, err)
	require.NoError(t, inbox.CreateTable(t.Context()))

	cons, err := js.CreateConsumer(t.Context(), stream, jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 500 * time.Millisecond})
	require.NoError(t, err)
	fetchOne := func(wait time.Duration) jetstream.Msg {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
		require.NoError(t, err)
		for m := range batch.Messages() {
			return m
		}
		return nil
	}

	first := fetchOne(5 * time.Second)
	require.NotNil(t, first)
	require.NoError(t, receiver.JetStreamHandler(t.Context(), inbox, lostAck{first}))

	again := fetchOne(10 * time.Second)
	require.NotNil(t, again, "redelivered after AckWait")
	meta, err := again.Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 2, meta.NumDelivered)
	require.NoError(t, receiver.JetStreamHandler(t.Context(), inbox, again))

	require.Nil(t, fetchOne(time.Second), "acked: not delivered again")
	var effects int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM effects`).Scan(&effects))
	require.Equal(t, 1, effects, "applied once")
}
