package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncejob/oncejob/store"
)

// jetStreamSink is the level-1 sink of a stream: JetStream stores a message
// id once within the stream's duplicate window, so a republish of an event
// (same Nats-Msg-Id) is acknowledged as a duplicate and not stored again.
type jetStreamSink struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  string
	prefix  string
	timeout time.Duration
}

// publishWindow is how many publishes of a sink wait for their acks at
// most, across the relay's loops: the window of acknowledgements of the
// asynchronous publishes (docs/architecture.md, "Routing and deliveries").
const publishWindow = 512

func newJetStreamSink(ctx context.Context, name string, c *JetStreamConfig) (*jetStreamSink, error) {
	url := c.URL
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url, nats.Name("oncejob-relay "+name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("jetstream sink %s: connect: %w", name, err)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	// An asynchronous publish whose ack does not come in time is dropped from
	// the pending ones (its future errs), so none lingers; at most
	// publishWindow wait for their acks at once, whatever the routings
	// publishing (a publish past it waits for an ack, up to the timeout).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(timeout), jetstream.WithPublishAsyncMaxPending(publishWindow))
	if err != nil {
		nc.Close()
		return nil, err
	}
	s := &jetStreamSink{nc: nc, js: js, stream: c.Stream, prefix: c.SubjectPrefix, timeout: timeout}
	if s.prefix == "" {
		s.prefix = "oncejob"
	}
	if c.CreateStream {
		window := c.DuplicateWindow
		if window == 0 {
			window = 2 * time.Minute
		}
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:       c.Stream,
			Subjects:   []string{s.prefix + ".>"},
			Duplicates: window,
			Storage:    jetstream.FileStorage,
		})
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("jetstream sink %s: create stream %s: %w", name, c.Stream, err)
		}
	}
	return s, nil
}

// Subject is where an event of a tenant is published:
// <prefix>.<tenant>.<event type>, the tenant made a single subject token.
func Subject(prefix, tenant, eventType string) string {
	return prefix + "." + subjectToken(tenant) + "." + eventType
}

func subjectToken(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

// Deliver implements Sink: publish with Nats-Msg-Id = the event id and wait
// for the stream's ack. No ack in time is an unknown outcome: the stream may
// hold the message; the retry's duplicate ack tells.
func (s *jetStreamSink) Deliver(ctx context.Context, d *store.Delivery) Result {
	ack, err := s.publish(ctx, d.EventID, Subject(s.prefix, d.Tenant, d.EventType), d.Payload)
	if err != nil {
		return publishFailed(err)
	}
	return acked(ack)
}

// DeliverBatch implements BatchSink: every delivery published at once
// (asynchronously, pipelined on the connection, in the batch's order, past
// publishWindow waiting for acks), then every ack awaited; each result is
// as Deliver's. A publish that waited in vain for room is failed: it was
// not sent.
func (s *jetStreamSink) DeliverBatch(ctx context.Context, ds []*store.Delivery) []Result {
	out := make([]Result, len(ds))
	futures := make([]jetstream.PubAckFuture, len(ds))
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(s.stream), jetstream.WithStallWait(s.timeout)}
	subjects := map[[2]string]string{} // a batch's events are of few tenants and types
	for i, d := range ds {
		subject, ok := subjects[[2]string{d.Tenant, d.EventType}]
		if !ok {
			subject = Subject(s.prefix, d.Tenant, d.EventType)
			subjects[[2]string{d.Tenant, d.EventType}] = subject
		}
		// The header's key is canonical already (Header.Set would canonicalize it).
		msg := &nats.Msg{Subject: subject, Data: d.Payload, Header: nats.Header{jetstream.MsgIDHeader: {d.EventID}}}
		f, err := s.js.PublishMsgAsync(msg, opts...)
		if err != nil {
			out[i] = Result{Outcome: store.DeliveryOutcomeFailed, Err: fmt.Errorf("publish: %w", err)}
			continue
		}
		futures[i] = f
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			out[i] = acked(ack)
		case err := <-f.Err():
			out[i] = publishFailed(err)
		case <-ctx.Done():
			out[i] = publishFailed(ctx.Err())
		}
	}
	return out
}

func acked(ack *jetstream.PubAck) Result {
	return Result{Outcome: store.DeliveryOutcomeDelivered, ExternalRef: ack.Stream + ":" + strconv.FormatUint(ack.Sequence, 10), Duplicate: ack.Duplicate}
}

// publishFailed is the result of a publish that got no ack: unknown when
// it may have been stored (no ack in time), failed otherwise.
func publishFailed(err error) Result {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		return Result{Outcome: store.DeliveryOutcomeUnknown, Err: fmt.Errorf("no publish ack: %w", err)}
	}
	return Result{Outcome: store.DeliveryOutcomeFailed, Err: fmt.Errorf("publish: %w", err)}
}

func (s *jetStreamSink) publish(ctx context.Context, id, subject string, payload []byte) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	msg := nats.NewMsg(subject)
	msg.Data = payload
	msg.Header.Set(jetstream.MsgIDHeader, id)
	return s.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(s.stream))
}

// holds reports whether the stream still holds the event at ref (the
// delivery's external reference): the message at that sequence carries the
// event's id.
func (s *jetStreamSink) holds(ctx context.Context, eventID, ref string) (bool, error) {
	stream, seqText, ok := strings.Cut(ref, ":")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || err != nil || stream != s.stream {
		return false, nil
	}
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return false, err
	}
	msg, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return msg.Header.Get(jetstream.MsgIDHeader) == eventID, nil
}

// Close implements Sink.
func (s *jetStreamSink) Close() error {
	return s.nc.Drain()
}
