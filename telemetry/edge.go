package telemetry

import "github.com/prometheus/client_golang/prometheus"

// EdgeRefusals are the counters of calls refused at the edge, before any
// handler: authRefused counts UNAUTHENTICATED answers (no key, an unknown
// or revoked one; their log lines are sampled, the counter is not),
// malformed the requests that were not valid protobuf (INVALID_ARGUMENT,
// MALFORMED_MESSAGE).
func EdgeRefusals(authRefused, malformed func() int64) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "oncejob_auth_refusals_total",
			Help: "Calls refused with UNAUTHENTICATED: no API key, or one nobody knows or that was revoked. Their log lines are sampled (at most one a second); this counts them all.",
		}, func() float64 { return float64(authRefused()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "oncejob_grpc_malformed_requests_total",
			Help: "gRPC requests refused with INVALID_ARGUMENT (MALFORMED_MESSAGE) because they were not valid protobuf for their method.",
		}, func() float64 { return float64(malformed()) }),
	}
}
