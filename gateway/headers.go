package gateway

import (
	"net/textproto"

	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/requestid"
)

// HTTP headers of the API.
const (
	idempotencyKeyHeader = "Idempotency-Key"
	replayedHeader       = "Idempotent-Replayed"
	requestIDHeader      = "X-Request-Id"
	lastEventIDHeader    = "Last-Event-ID"
	// The W3C trace context, so an HTTP caller's trace continues in the
	// server and in the job it submits.
	traceparentHeader = "Traceparent"
	tracestateHeader  = "Tracestate"
)

// incomingHeader maps the request headers the server reads to its
// metadata: Idempotency-Key to idempotency-key and X-Request-Id to
// x-request-id, Traceparent and Tracestate to their lower-case selves
// (Authorization passes as authorization on its own). Nothing else is
// forwarded, so no client header can pose as other metadata.
func incomingHeader(key string) (string, bool) {
	switch textproto.CanonicalMIMEHeaderKey(key) {
	case idempotencyKeyHeader:
		return idempotency.MetadataKey, true
	case requestIDHeader:
		return requestid.MetadataKey, true
	case traceparentHeader:
		return "traceparent", true
	case tracestateHeader:
		return "tracestate", true
	}
	return "", false
}

// outgoingHeader maps response metadata to headers: only
// idempotent-replayed, as Idempotent-Replayed. (X-Request-Id is set by
// ServeHTTP before the call, with the id the server keeps.)
func outgoingHeader(key string) (string, bool) {
	if key == idempotency.ReplayedHeader {
		return replayedHeader, true
	}
	return "", false
}
