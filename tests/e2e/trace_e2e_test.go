package e2e

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// otlpCollector is an OTLP/HTTP trace receiver on loopback: it decodes what
// the exporters send (protobuf, gzipped or not) and keeps the spans.
type otlpCollector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		data, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(c.Close)
	return c
}

// trace returns the spans received of one trace, by name.
func (c *otlpCollector) trace(traceID []byte) map[string][]*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, s := range c.spans {
		if string(s.GetTraceId()) == string(traceID) {
			byName[s.GetName()] = append(byName[s.GetName()], s)
		}
	}
	return byName
}

// TestTraceSpansSubmitToPublish follows one job through one trace: the Go
// SDK's call under the caller's span, SubmitJob on the server, the claim,
// the attempt, each stage, the LLM call, the publish and the delivery of
// its event to a webhook, exported by the real binary over OTLP/HTTP to a
// collector in the test, each span under the one that caused it. The
// delivery is counted on serve's /metrics by sink and outcome.
func TestTraceSpansSubmitToPublish(t *testing.T) {
	t.Parallel()
	collector := startOTLPCollector(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	config := writeFile(t, "oncejob.yaml", `
sinks:
  - name: hooks
    tenant: default
    events: [job.succeeded]
    webhook:
      url: `+hook.URL+`/hook
      secret: {env: HOOK_SECRET}
      allow_private_network: true
`)
	addr, httpAddr := freeAddr(t), freeAddr(t)
	srv := start(t, "serve", []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL,
		"OTEL_BSP_SCHEDULE_DELAY=50",
		"OTEL_SERVICE_NAME=oncejob-trace-test",
		"HOOK_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("a secret of twenty-four!")),
	}, "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr, "--http-addr", httpAddr, "--workers", "2",
		"--config", config, "--relay-poll-interval", "50ms")
	waitHealthy(t, srv, addr)
	require.Contains(t, srv.logs.String(), "tracing on")

	// The caller traces too: its span is the root, the SDK's call its child.
	recorder := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(recorder))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	client, err := clientsdk.Dial(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	ctx, root := tp.Tracer("test").Start(context.Background(), "invoice batch")
	res, err := client.Submit(ctx, &clientsdk.SubmitRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "oncejob traces a job from its submission to its publish."}},
	}, clientsdk.WithIdempotencyKey("trace-1"))
	require.NoError(t, err)
	root.End()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := client.Wait(wctx, res.Job.GetId())
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, job.GetStatus())

	traceID := root.SpanContext().TraceID()
	var spans map[string][]*tracepb.Span
	require.Eventually(t, func() bool {
		spans = collector.trace(traceID[:])
		return len(spans["oncejob.stage published"]) == 1 && len(spans["oncejob.deliver hooks"]) == 1
	}, 60*time.Second, 50*time.Millisecond, "the publish never reached the collector in the caller's trace %s", traceID)

	one := func(name string) *tracepb.Span {
		t.Helper()
		require.Len(t, spans[name], 1, "span %q in %v", name, names(spans))
		return spans[name][0]
	}
	// The SDK's client span, recorded in this process, is the root's child
	// and the server span's parent. The recorder sees the spans of every
	// test running in this process at once: only this trace's count.
	var clientSpan sdktrace.ReadOnlySpan
	for _, s := range recorder.GetSpans().Snapshots() {
		if s.Name() == "oncejob.v1.JobService/SubmitJob" && s.SpanContext().TraceID() == traceID {
			clientSpan = s
		}
	}
	require.NotNil(t, clientSpan, "the SDK traced its call")
	require.Equal(t, root.SpanContext().SpanID(), clientSpan.Parent().SpanID())
	clientID := clientSpan.SpanContext().SpanID()

	submit := one("oncejob.v1.JobService/SubmitJob")
	require.Equal(t, hex.EncodeToString(clientID[:]), hex.EncodeToString(submit.GetParentSpanId()), "SubmitJob's server span is the SDK call's child")
	claim := one("oncejob.claim")
	attempt := one("oncejob.job.attempt")
	require.Equal(t, submit.GetSpanId(), claim.GetParentSpanId(), "the claim is the submission's child: the job carried its traceparent")
	require.Equal(t, submit.GetSpanId(), attempt.GetParentSpanId())
	for _, stage := range []string{"text_extracted", "chunks_ready", "llm_done chunk 0", "llm_done", "validated", "published"} {
		s := one("oncejob.stage " + stage)
		require.Equal(t, attempt.GetSpanId(), s.GetParentSpanId(), "stage %s is the attempt's child", stage)
		require.GreaterOrEqual(t, s.GetStartTimeUnixNano(), submit.GetStartTimeUnixNano())
	}
	var llm *tracepb.Span
	for name, ss := range spans {
		if strings.HasPrefix(name, "oncejob.llm ") {
			require.Len(t, ss, 1)
			llm = ss[0]
		}
	}
	require.NotNil(t, llm, "the LLM call is in the trace: %v", names(spans))
	require.Equal(t, one("oncejob.stage llm_done chunk 0").GetSpanId(), llm.GetParentSpanId(), "the LLM call is its chunk's child")
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, llm.GetKind())
	published := one("oncejob.stage published")
	require.GreaterOrEqual(t, published.GetEndTimeUnixNano(), llm.GetEndTimeUnixNano(), "the publish follows the LLM call")
	deliver := one("oncejob.deliver hooks")
	require.Equal(t, submit.GetSpanId(), deliver.GetParentSpanId(), "the delivery joins the job's trace")
	require.GreaterOrEqual(t, deliver.GetStartTimeUnixNano(), published.GetStartTimeUnixNano())
	require.Equal(t, tracepb.Span_SPAN_KIND_PRODUCER, deliver.GetKind())

	// An HTTP caller's traceparent header continues its trace the same way.
	const httpTrace = "0af7651916cd43dd8448eb211c80319c"
	req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/jobs",
		strings.NewReader(`{"pipeline": "summarize", "document": {"text": "traced over HTTP"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "trace-http-1")
	req.Header.Set("Traceparent", "00-"+httpTrace+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	httpTraceID, _ := hex.DecodeString(httpTrace)
	require.Eventually(t, func() bool {
		s := collector.trace(httpTraceID)
		return len(s["oncejob.v1.JobService/SubmitJob"]) == 1 && len(s["oncejob.stage published"]) == 1
	}, 60*time.Second, 50*time.Millisecond, "the HTTP caller's trace never showed its job published")
	require.Equal(t, "b7ad6b7169203331", hex.EncodeToString(collector.trace(httpTraceID)["oncejob.v1.JobService/SubmitJob"][0].GetParentSpanId()))

	fams := scrape(t, "http://"+httpAddr+"/metrics")
	require.Positive(t, sumByLabel(fams, "oncejob_deliveries_total", "sink", "hooks"))
	require.Positive(t, histogramCount(fams, "oncejob_outbox_lag_seconds"))
	requireBoundedLabels(t, fams, []*oncejobv1.Job{job})
	srv.stop()
}

func names(spans map[string][]*tracepb.Span) []string {
	var out []string
	for n := range spans {
		out = append(out, n)
	}
	return out
}
