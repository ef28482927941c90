package receiver

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamHandler applies a JetStream message once and acknowledges it only
// after the apply committed. A lost ack (the process dies, the ack does not
// arrive) gets the message redelivered after the consumer's AckWait; the
// inbox then finds the event applied and the redelivery is only acked.
// Use it as a jetstream.MessageHandler's body:
//
//	cons.Consume(func(m jetstream.Msg) { _ = receiver.JetStreamHandler(ctx, inbox, m) })
func JetStreamHandler(ctx context.Context, a Applier, m jetstream.Msg) error {
	e, err := ParseEvent(m.Data())
	if err != nil {
		// Not an event: no retry makes it one.
		_ = m.Term()
		return err
	}
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" && id != e.ID {
		_ = m.Term()
		return fmt.Errorf("receiver: Nats-Msg-Id %q is not the event id %q", id, e.ID)
	}
	if _, _, err := a.Apply(ctx, e); err != nil {
		_ = m.Nak()
		return err
	}
	return m.Ack()
}
