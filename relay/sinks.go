package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/oncejob/oncejob/store"
)

// Sinks are the configured sinks, connected, and the routing of events to
// them.
type Sinks struct {
	byName map[string]*openSink
	names  []string
}

type openSink struct {
	cfg    SinkConfig
	policy RetryPolicy
	sink   Sink
}

// OpenSinks validates the sinks section and connects each sink. st backs
// the chat sink's sent messages.
func OpenSinks(ctx context.Context, cfgs []SinkConfig, st store.DeliveryStore) (*Sinks, error) {
	if err := ValidateSinks(cfgs); err != nil {
		return nil, err
	}
	s := &Sinks{byName: map[string]*openSink{}}
	for _, c := range cfgs {
		sink, err := openOne(ctx, c, st)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("sink %s: %w", c.Name, err)
		}
		s.byName[c.Name] = &openSink{cfg: c, policy: c.Retry.WithDefaults(), sink: sink}
		s.names = append(s.names, c.Name)
	}
	sort.Strings(s.names)
	return s, nil
}

func openOne(ctx context.Context, c SinkConfig, st store.DeliveryStore) (Sink, error) {
	switch {
	case c.Webhook != nil:
		return newWebhookSink(c.Webhook)
	case c.JetStream != nil:
		return newJetStreamSink(ctx, c.Name, c.JetStream)
	case c.Chat != nil:
		return newChatSink(c.Name, c.Chat, st)
	}
	return nil, errors.New("no sink kind")
}

// Route returns the sinks an event goes to: those of the event's tenant -
// never another's - subscribed to its type and, when they name pipelines,
// to its pipeline.
func (s *Sinks) Route(e *store.OutboxEvent) []string {
	var out []string
	for _, name := range s.names {
		c := s.byName[name].cfg
		if c.Tenant != e.Tenant || !slices.Contains(c.Events, e.EventType) {
			continue
		}
		if len(c.Pipelines) > 0 && !slices.Contains(c.Pipelines, e.Pipeline) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// Get returns a sink and its retry policy.
func (s *Sinks) Get(name string) (Sink, RetryPolicy, bool) {
	o, ok := s.byName[name]
	if !ok {
		return nil, RetryPolicy{}.WithDefaults(), false
	}
	return o.sink, o.policy, true
}

// Direct reports whether the sink honours an idempotency key (webhook,
// JetStream), so that its deliveries may be attempted at routing: an
// attempt whose routing is not written is made again with the same event
// id, and the receiver or the stream keeps the event once. The chat sink's
// check-then-act needs its delivery row first.
func (s *Sinks) Direct(name string) bool {
	o, ok := s.byName[name]
	return ok && (o.cfg.Webhook != nil || o.cfg.JetStream != nil)
}

// Names are the sinks' names, sorted.
func (s *Sinks) Names() []string { return s.names }

// Len is the number of sinks.
func (s *Sinks) Len() int { return len(s.names) }

// Close closes every sink.
func (s *Sinks) Close() error {
	var errs []error
	for _, o := range s.byName {
		errs = append(errs, o.sink.Close())
	}
	return errors.Join(errs...)
}
