// Package clientsdk is the Go client of oncejob: jobs submitted once however
// often a call is retried, watched without gaps however often a stream
// breaks.
//
// # One key per intent
//
// Every mutating call carries an idempotency key fixed before its first
// attempt and sent on each retry, so a retry is a replay, never a second
// job. Submit takes the caller's key (WithIdempotencyKey) or derives one
// from the request (SubmitKey, built on WorkID): the same request is the
// same intent, in this process or after a restart. The operator calls
// (Cancel, Replay, Resolve, Approve) make one key per call. Nothing in the
// SDK makes a key per attempt.
//
// WorkID(kind, version, payload, drop...) is the key of any unit of work:
// the hex sha256 of "kind:version:" and the server's canonical JSON of the
// payload (package jobkey: keys sorted, strings trimmed, numbers
// normalised), volatile members removed first. The Python SDK's work_id
// reproduces it bit for bit.
//
// # Retries
//
// UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED and broken
// connections are retried with exponential backoff and full jitter, or
// after the delay of a google.rpc.RetryInfo the server sent. Retries are
// bounded by RetryPolicy.MaxAttempts and by the context's deadline: a wait
// that would pass the deadline is cut at it, and the call ends there with a
// *BudgetError (errors.Is(err, ErrBudgetSpent)). A unary call's context
// without a deadline gets the client's timeout (WithTimeout, default 30s).
// The loop is go-grpc-middleware's retry interceptor.
//
// # Watching
//
// Watch is an iterator over a job's events that resumes a broken stream
// from the last seq it yielded, on any replica the client reaches, so the
// caller sees every event once and in order; WatchJobs does the same with
// the tenant-wide cursor. Wait returns the job once it is terminal.
//
// # TLS
//
// WithTLS(cfg) connects over TLS; TLSConfig(caFile, certFile, keyFile)
// makes cfg trusting a custom CA and presenting a client certificate, for
// a server run with --tls-cert and --tls-client-ca (docs/operations.md).
//
// # Errors
//
// Errors from the server keep their gRPC status (status.Code works) and
// decode to types: ErrNotFound (errors.Is), *KeyReusedError,
// *PreconditionError (with the job's status), *InvalidRequestError (with
// the field violations), *BudgetError, or *StatusError.
package clientsdk
