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

func newJetStreamSink(ctx context.Context, name string, c *JetStreamConfig) (*jetStreamSink, error) {
	url := c.URL
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url, nats.Name("oncejob-relay "+name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("jetstream sink %s: connect: %w", name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s := &jetStreamSink{nc: nc, js: js, stream: c.Stream, prefix: c.SubjectPrefix, timeout: c.Timeout}
	if s.prefix == "" {
		s.prefix = "oncejob"
	}
	if s.timeout == 0 {
		s.timeout = 5 * time.Second
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
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return Result{Outcome: store.DeliveryOutcomeUnknown, Err: fmt.Errorf("no publish ack: %w", err)}
		}
		return Result{Outcome: store.DeliveryOutcomeFailed, Err: fmt.Errorf("publish: %w", err)}
	}
	return Result{Outcome: store.DeliveryOutcomeDelivered, ExternalRef: ack.Stream + ":" + strconv.FormatUint(ack.Sequence, 10), Duplicate: ack.Duplicate}
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
