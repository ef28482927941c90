package telemetry

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncejob/oncejob/store"
)

// Span attributes of oncejob's own spans.
const (
	attrJobID       = attribute.Key("oncejob.job.id")
	attrPipeline    = attribute.Key("oncejob.pipeline")
	attrAttempt     = attribute.Key("oncejob.attempt")
	attrClaimedFrom = attribute.Key("oncejob.claimed_from")
	attrStatus      = attribute.Key("oncejob.status")
	attrStage       = attribute.Key("oncejob.stage")
	attrChunk       = attribute.Key("oncejob.chunk")
	attrSource      = attribute.Key("oncejob.source")
	attrOutcome     = attribute.Key("oncejob.outcome")
	attrProviderKey = attribute.Key("oncejob.provider_key")
	attrSink        = attribute.Key("oncejob.sink")
	attrEventID     = attribute.Key("oncejob.event_id")
)

// WorkerObserver is worker.Observer: it counts and times what the engine
// does (when Metrics is set) and traces it, each job's spans in the trace of
// the SubmitJob that created it (its traceparent).
type WorkerObserver struct {
	// Metrics; nil: spans only.
	Metrics *Metrics
	// Provider names the LLM provider in the metrics' provider label.
	Provider string
}

// JobStarted implements worker.Observer: a claim span, from the claim's
// commit (the job's UpdatedAt) to now, and the attempt's span, under which
// the stages' spans go.
func (o *WorkerObserver) JobStarted(ctx context.Context, job *store.Job) (context.Context, func(store.JobStatus, string)) {
	now := time.Now()
	if m := o.Metrics; m != nil {
		if job.ClaimedFrom == store.JobStatusRunning {
			m.leaseTakeovers.WithLabelValues(job.Pipeline).Inc()
		}
		if job.Attempt == 1 {
			m.jobStartLatency.WithLabelValues(job.Pipeline).Observe(max(0, now.Sub(job.CreatedAt).Seconds()))
		}
	}
	ctx = withTraceparent(ctx, job.Traceparent)
	attrs := []attribute.KeyValue{
		attrJobID.String(job.ID), attrPipeline.String(job.Pipeline),
		attrAttempt.Int(int(job.Attempt)), attrClaimedFrom.String(string(job.ClaimedFrom)),
	}
	claimedAt := job.UpdatedAt
	if claimedAt.IsZero() || claimedAt.After(now) {
		claimedAt = now // another clock than ours: the claim is no later than now
	}
	_, claim := tracer().Start(ctx, "oncejob.claim", trace.WithTimestamp(claimedAt), trace.WithAttributes(attrs...))
	claim.End(trace.WithTimestamp(now))
	ctx, span := tracer().Start(ctx, "oncejob.job.attempt", trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	return ctx, func(status store.JobStatus, budget string) {
		if m := o.Metrics; m != nil && status != "" {
			m.jobsSettled.WithLabelValues(job.Pipeline, string(status)).Inc()
			if status == store.JobStatusDeadLettered {
				m.deadLetters.WithLabelValues(job.Pipeline).Inc()
				if budget != "" {
					m.budgetsExhausted.WithLabelValues(job.Pipeline, budget).Inc()
				}
			}
		}
		span.SetAttributes(attrStatus.String(string(status)))
		if budget != "" {
			span.SetAttributes(attribute.String("oncejob.budget_spent", budget))
		}
		span.End()
	}
}

// StageStarted implements worker.Observer.
func (o *WorkerObserver) StageStarted(ctx context.Context, job *store.Job, stage store.JobStage, chunk int32) (context.Context, func(string, error)) {
	start := time.Now()
	name := "oncejob.stage " + string(stage)
	if chunk >= 0 {
		name += " chunk " + strconv.Itoa(int(chunk))
	}
	ctx, span := tracer().Start(ctx, name, trace.WithAttributes(attrStage.String(string(stage)), attrChunk.Int(int(chunk))))
	return ctx, func(source string, err error) {
		result := "ok"
		if err != nil {
			result = "error"
			span.SetStatus(codes.Error, err.Error())
		}
		if m := o.Metrics; m != nil {
			m.stageDuration.WithLabelValues(job.Pipeline, string(stage), source, result).Observe(time.Since(start).Seconds())
		}
		span.SetAttributes(attrSource.String(source))
		span.End()
	}
}

// LLMCallStarted implements worker.Observer: a client span with the GenAI
// semantic conventions' attributes.
func (o *WorkerObserver) LLMCallStarted(ctx context.Context, _ *store.Job, model string) (context.Context, func(*store.LLMAttempt)) {
	ctx, span := tracer().Start(ctx, "oncejob.llm "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.request.model", model), attribute.String("gen_ai.system", o.Provider)))
	return ctx, func(a *store.LLMAttempt) {
		defer span.End()
		if a.Outcome == "" {
			span.SetAttributes(attrOutcome.String("not_called"))
			return
		}
		span.SetAttributes(attrOutcome.String(string(a.Outcome)), attrProviderKey.String(a.ProviderKey),
			attribute.Int64("gen_ai.usage.input_tokens", a.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", a.CompletionTokens),
			attribute.Bool("oncejob.billed", a.Billed))
		if a.Outcome != store.LLMOutcomeSucceeded {
			span.SetStatus(codes.Error, a.Error)
		}
		m := o.Metrics
		if m == nil {
			return
		}
		m.llmCalls.WithLabelValues(o.Provider, a.Model, string(a.Outcome)).Inc()
		m.llmDuration.WithLabelValues(o.Provider, a.Model).Observe(float64(a.LatencyMillis) / 1000)
		if a.Outcome == store.LLMOutcomeOutcomeUnknown {
			m.llmUnknown.WithLabelValues(o.Provider, a.Model).Inc()
		}
		if a.Billed {
			m.llmTokens.WithLabelValues(o.Provider, a.Model, "prompt").Add(float64(a.PromptTokens))
			m.llmTokens.WithLabelValues(o.Provider, a.Model, "completion").Add(float64(a.CompletionTokens))
			m.llmCost.WithLabelValues(o.Provider, a.Model).Add(float64(a.CostMicros) / 1e6)
		}
	}
}

// RelayObserver is relay.Observer: deliveries counted by sink and outcome,
// the outbox's lag, and a span per attempt in the trace of the job the
// event belongs to.
type RelayObserver struct {
	// Metrics; nil: spans only.
	Metrics *Metrics
	// Traceparent returns the trace context a job was submitted under; nil
	// (or "") puts delivery spans in no job's trace.
	Traceparent func(ctx context.Context, tenant, jobID string) string
	// Tracing says whether spans are exported (StartTracing's enabled); off,
	// Traceparent is not asked.
	Tracing bool
}

// Delivered implements relay.Observer.
func (o *RelayObserver) Delivered(ctx context.Context, d *store.Delivery, res *store.DeliveryResult) {
	if m := o.Metrics; m != nil {
		m.deliveries.WithLabelValues(d.Sink, string(res.Outcome)).Inc()
		if res.Status == store.DeliveryStatusDelivered && !d.EventCreatedAt.IsZero() {
			m.outboxLag.WithLabelValues(d.Sink).Observe(max(0, res.FinishedAt.Sub(d.EventCreatedAt).Seconds()))
		}
	}
	if !o.Tracing || o.Traceparent == nil {
		return
	}
	ctx = withTraceparent(ctx, o.Traceparent(ctx, d.Tenant, d.JobID))
	_, span := tracer().Start(ctx, "oncejob.deliver "+d.Sink, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(res.StartedAt), trace.WithAttributes(
			attrJobID.String(d.JobID), attrSink.String(d.Sink), attrEventID.String(d.EventID),
			attrAttempt.Int(int(d.Attempt)), attrOutcome.String(string(res.Outcome)), attrStatus.String(string(res.Status))))
	if res.Error != "" && res.Status != store.DeliveryStatusDelivered {
		span.SetStatus(codes.Error, res.Error)
	}
	span.End(trace.WithTimestamp(res.FinishedAt))
}

// RoundFailed implements relay.Observer.
func (o *RelayObserver) RoundFailed(_ context.Context, step string, _ error) {
	if m := o.Metrics; m != nil {
		m.relayFailures.WithLabelValues(step).Inc()
	}
}
