package server

import (
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/watch"
)

// EstablishedHeader is the response header a watch sends, set to "true",
// once it is established (authenticated, valid, the job found) and before
// its first event. A failed watch sends headers too (with its status, as
// any RPC), but never this one, so a proxy can tell the two apart before
// the first event, which may be long in coming.
const EstablishedHeader = "watch-established"

func sendEstablished(stream grpc.ServerStream) {
	_ = stream.SendHeader(metadata.Pairs(EstablishedHeader, "true"))
}

// errWatchUnavailable is WatchJob and WatchJobs on a server without a hub.
var errWatchUnavailable = status.Error(codes.Unimplemented,
	"watching is not available on this server: its store does not support it (the Postgres store does)")

// WatchJob streams one job's events; see the proto and watch.Hub.WatchJob.
// Read-only: no idempotency contract.
func (s *jobService) WatchJob(req *oncejobv1.WatchJobRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobResponse]) error {
	if s.cfg.Watch == nil {
		return errWatchUnavailable
	}
	ctx := stream.Context()
	t, _ := tenant.FromContext(ctx)
	last := req.GetAfterSeq()
	var sendErr error
	established := func() { sendEstablished(stream) }
	err := s.cfg.Watch.WatchJob(ctx, &watch.JobParams{Tenant: t, JobID: req.GetJobId(), AfterSeq: last, Ready: established}, func(e *store.JobEvent) error {
		if sendErr = stream.Send(&oncejobv1.WatchJobResponse{Event: eventToProto(e)}); sendErr != nil {
			return sendErr
		}
		last = e.Seq
		return nil
	})
	switch {
	case err == nil:
		return nil
	case sendErr != nil:
		return sendErr // the client is gone; the transport has its status
	case errors.Is(err, watch.ErrShuttingDown):
		return shuttingDown("after_seq", strconv.Itoa(int(last)))
	case errors.Is(err, watch.ErrAfterSeqPastEnd):
		return status.Errorf(codes.OutOfRange, "after_seq %d is past the last event of job %s", req.GetAfterSeq(), req.GetJobId())
	}
	return s.storeError(ctx, err, "job "+req.GetJobId())
}

// WatchJobs streams the changes of the tenant's jobs; see the proto and
// watch.Hub.WatchJobs. Read-only: no idempotency contract.
func (s *jobService) WatchJobs(req *oncejobv1.WatchJobsRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobsResponse]) error {
	if s.cfg.Watch == nil {
		return errWatchUnavailable
	}
	ctx := stream.Context()
	t, _ := tenant.FromContext(ctx)
	params := &store.JobChangeListParams{Tenant: t, Pipeline: req.GetPipeline()}
	if req.GetStatus() != oncejobv1.JobStatus_JOB_STATUS_UNSPECIFIED {
		params.Status = statusFromProto[req.GetStatus()]
	}
	after, err := decodeWatchCursor(s.tokens, t, req.GetAfterCursor())
	if err != nil {
		var v violations
		v.add("after_cursor", "%s", err)
		return v.err()
	}
	params.After = after
	last := req.GetAfterCursor()
	sendEstablished(stream) // authenticated and valid
	var sendErr error
	err = s.cfg.Watch.WatchJobs(ctx, params, func(c *store.JobChange) error {
		cursor := encodeWatchCursor(s.tokens, t, c.Cursor)
		if sendErr = stream.Send(&oncejobv1.WatchJobsResponse{Cursor: cursor, Event: eventToProto(c.Event), Job: jobToProto(c.Job)}); sendErr != nil {
			return sendErr
		}
		last = cursor
		return nil
	})
	switch {
	case sendErr != nil:
		return sendErr
	case errors.Is(err, watch.ErrShuttingDown):
		return shuttingDown("after_cursor", last)
	case errors.Is(err, watch.ErrSlowConsumer):
		return cutOff(ReasonSlowConsumer, "after_cursor", last,
			"this watch fell further behind its tenant's changes than the server keeps while its client was not reading")
	case isMemoryBudget(err):
		return cutOff(membudget.ReasonMemoryBudget, "after_cursor", last,
			"the server's memory budget cannot hold this watch's changes now")
	}
	return s.storeError(ctx, err, "jobs")
}

// ReasonSlowConsumer is the ErrorInfo reason of a watch cut off because its
// client read slower than its changes came (watch.ErrSlowConsumer).
const ReasonSlowConsumer = "SLOW_CONSUMER"

// cutOff is RESOURCE_EXHAUSTED for a watch the server ended to bound what
// it holds: the reason and where to resume in ErrorInfo metadata, and a
// RetryInfo, as the SDKs resume on it.
func cutOff(reason, field, value, why string) error {
	st, _ := status.New(codes.ResourceExhausted, why+"; resume with "+field+"="+value).WithDetails(
		&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: map[string]string{field: value}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)},
	)
	return st.Err()
}

// isMemoryBudget reports whether err is the memory budget's refusal.
func isMemoryBudget(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == membudget.ReasonMemoryBudget {
			return true
		}
	}
	return false
}

// shuttingDown is UNAVAILABLE with where to resume, in the message for
// people and in ErrorInfo metadata for programs.
func shuttingDown(field, value string) error {
	st, _ := status.New(codes.Unavailable, "server shutting down; resume with "+field+"="+value).
		WithDetails(&errdetails.ErrorInfo{Reason: "SERVER_SHUTTING_DOWN", Domain: errorDomain, Metadata: map[string]string{field: value}})
	return st.Err()
}

func eventToProto(e *store.JobEvent) *oncejobv1.JobEvent {
	return &oncejobv1.JobEvent{
		JobId:   e.JobID,
		Seq:     e.Seq,
		Status:  statusToProto[e.Status],
		Stage:   stageToProto[e.Stage],
		Attempt: e.Attempt,
		Time:    timestamppb.New(e.CreatedAt),
		Message: e.Message,
		Actor:   actorToProto(e.Actor),

		NextAttemptTime: timeToProto(e.NextAttemptAt),
	}
}

// timeToProto is t, unset when nil.
func timeToProto(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func actorToProto(a *store.Actor) *oncejobv1.Actor {
	if a == nil {
		return nil
	}
	return &oncejobv1.Actor{KeyPrefix: a.KeyPrefix, Role: string(a.Role), Rpc: a.RPC}
}

// validationStreamInterceptor validates the request of a server stream as
// it is received, before the handler runs.
func validationStreamInterceptor(validate func(req any) error) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &validatingStream{ServerStream: ss, validate: validate})
	}
}

type validatingStream struct {
	grpc.ServerStream
	validate func(req any) error
}

func (s *validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.validate(m)
}
