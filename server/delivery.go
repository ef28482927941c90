package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// deliveryService implements oncejobv1.DeliveryServiceServer on a
// store.DeliveryStore.
type deliveryService struct {
	oncejobv1.UnimplementedDeliveryServiceServer
	jobs  *jobService // for its store error mapping
	store store.DeliveryStore
}

var sinkNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// validateAll is the validation of every unary request: JobService's and
// DeliveryService's (their request types are disjoint).
func (s *jobService) validateAll(req any) error {
	if err := s.validate(req); err != nil {
		return err
	}
	return validateDelivery(req)
}

func validateDelivery(req any) error {
	var v violations
	switch r := req.(type) {
	case *oncejobv1.ListDeliveriesRequest:
		if r.GetJobId() != "" {
			validateID(&r.JobId, "job_id", &v)
		}
		if _, ok := oncejobv1.DeliveryStatus_name[int32(r.GetStatus())]; !ok {
			v.add("status", "unknown status %d", r.GetStatus())
		}
		if r.GetSink() != "" && !sinkNamePattern.MatchString(r.GetSink()) {
			v.add("sink", "is not a sink name")
		}
		if r.GetPageSize() < 0 || r.GetPageSize() > maxPageSize {
			v.add("page_size", "must be between 0 and %d", maxPageSize)
		}
	case *oncejobv1.RetryDeliveryRequest:
		switch t := r.GetTarget().(type) {
		case nil:
			v.add("target", "set delivery_id or sink")
		case *oncejobv1.RetryDeliveryRequest_DeliveryId:
			if t.DeliveryId <= 0 {
				v.add("delivery_id", "must be positive")
			}
		case *oncejobv1.RetryDeliveryRequest_Sink:
			if !sinkNamePattern.MatchString(t.Sink) {
				v.add("sink", "is not a sink name")
			}
		}
	}
	return v.err()
}

// ListDeliveries returns one page of the tenant's deliveries, dead letters
// first, and its disabled sinks. Read-only.
func (s *deliveryService) ListDeliveries(ctx context.Context, req *oncejobv1.ListDeliveriesRequest) (*oncejobv1.ListDeliveriesResponse, error) {
	t, _ := tenant.FromContext(ctx)
	limit := int(req.GetPageSize())
	if limit == 0 {
		limit = defaultPageSize
	}
	after, err := decodeDeliveryToken(s.jobs.tokens, t, req)
	if err != nil {
		return nil, pageTokenError(err)
	}
	res, err := s.store.DeliveryList(ctx, &store.DeliveryListParams{
		Tenant: t, JobID: req.GetJobId(), Status: deliveryStatusFromProto[req.GetStatus()], Sink: req.GetSink(),
		Limit: limit, After: after,
	})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "deliveries")
	}
	resp := &oncejobv1.ListDeliveriesResponse{}
	for _, d := range res.Deliveries {
		pd := deliveryToProto(d)
		if req.GetIncludeAttempts() {
			attempts, err := s.store.DeliveryAttemptList(ctx, &store.DeliveryAttemptListParams{DeliveryID: d.ID})
			if err != nil {
				return nil, s.jobs.storeError(ctx, err, "delivery attempts")
			}
			for _, a := range attempts {
				pd.AttemptLog = append(pd.AttemptLog, attemptToProto(a))
			}
		}
		resp.Deliveries = append(resp.Deliveries, pd)
	}
	if res.Next != nil {
		resp.NextPageToken = encodeDeliveryToken(s.jobs.tokens, t, res.Next, req)
	}
	sinks, err := s.store.SinkStateList(ctx, &store.SinkStateListParams{Tenant: t})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "sinks")
	}
	for _, st := range sinks {
		resp.DisabledSinks = append(resp.DisabledSinks, &oncejobv1.SinkState{Sink: st.Sink, DisableTime: timestamppb.New(st.DisabledAt), Reason: st.Reason})
	}
	return resp, nil
}

// RetryDelivery queues dead-lettered deliveries again with a fresh budget.
//
// Idempotency contract: identity tenant + target (delivery_id or sink); no
// key and no window - the state decides: only a dead-lettered delivery
// moves, so a repeat returns the delivery as it is (PENDING) and queues
// nothing again. A delivered delivery is FAILED_PRECONDITION
// (DELIVERY_STATUS_CONFLICT); another tenant's is NOT_FOUND.
func (s *deliveryService) RetryDelivery(ctx context.Context, req *oncejobv1.RetryDeliveryRequest) (*oncejobv1.RetryDeliveryResponse, error) {
	t, _ := tenant.FromContext(ctx)
	params := &store.DeliveryRetryParams{Tenant: t, ID: req.GetDeliveryId(), Sink: req.GetSink()}
	res, err := s.store.DeliveryRetry(ctx, params)
	var refused *store.DeliveryRefusedError
	if errors.As(err, &refused) {
		id := strconv.FormatInt(req.GetDeliveryId(), 10)
		current := deliveryStatusToProto[refused.Status].String()
		st, _ := status.Newf(codes.FailedPrecondition, "delivery %s is %s: only a dead-lettered delivery is retried", id, current).WithDetails(
			&errdetails.ErrorInfo{Reason: "DELIVERY_STATUS_CONFLICT", Domain: errorDomain, Metadata: map[string]string{"delivery_id": id, "status": current}},
			&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{Type: "STATUS", Subject: "deliveries/" + id, Description: "the delivery is " + current}}},
		)
		return nil, st.Err()
	}
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "delivery "+strconv.FormatInt(req.GetDeliveryId(), 10))
	}
	resp := &oncejobv1.RetryDeliveryResponse{SinkEnabled: res.SinkEnabled}
	for _, d := range res.Deliveries {
		resp.Deliveries = append(resp.Deliveries, deliveryToProto(d))
	}
	return resp, nil
}

var errDeliveryToken = errors.New("is not a page token this server issued for ListDeliveries (or its secret has changed since); list again from the first page")

// Delivery page tokens name a position in ListDeliveries' order and the
// filters the page was listed under, "d2:<rank>:<id>:<status>:<job_id>:<sink>"
// (a job id is a UUID and a sink name has no colon), sealed by pagetoken
// for the caller's tenant (docs/architecture.md, "Page tokens"). A token
// used with other filters is refused: the page after its position would
// silently skip the rows of the new filters before it.
func encodeDeliveryToken(sig *pagetoken.Signer, tenant string, c *store.DeliveryCursor, r *oncejobv1.ListDeliveriesRequest) string {
	return sig.Seal(pagetoken.Deliveries, tenant, fmt.Appendf(nil, "d2:%d:%d:%d:%s:%s", c.Rank, c.ID, r.GetStatus(), r.GetJobId(), r.GetSink()))
}

var errDeliveryTokenFilters = errors.New("was issued for other filters; list again from the first page")

// decodeDeliveryToken checks a token's seal and parses it; empty is the
// first page. A "d1" token, from before tokens held their filters, is
// taken only by a list without filters.
func decodeDeliveryToken(sig *pagetoken.Signer, tenant string, r *oncejobv1.ListDeliveriesRequest) (*store.DeliveryCursor, error) {
	if r.GetPageToken() == "" {
		return nil, nil
	}
	raw, err := sig.Open(pagetoken.Deliveries, tenant, r.GetPageToken())
	if err != nil {
		return nil, errDeliveryToken
	}
	parts := strings.Split(string(raw), ":")
	switch {
	case len(parts) == 3 && parts[0] == "d1":
		if r.GetStatus() != 0 || r.GetJobId() != "" || r.GetSink() != "" {
			return nil, errDeliveryTokenFilters
		}
	case len(parts) == 6 && parts[0] == "d2":
		if parts[3] != strconv.Itoa(int(r.GetStatus())) || parts[4] != r.GetJobId() || parts[5] != r.GetSink() {
			return nil, errDeliveryTokenFilters
		}
	default:
		return nil, errDeliveryToken
	}
	rank, err1 := strconv.Atoi(parts[1])
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || rank < 0 || rank > 2 || id < 0 {
		return nil, errDeliveryToken
	}
	return &store.DeliveryCursor{Rank: rank, ID: id}, nil
}

var deliveryStatusToProto = map[store.DeliveryStatus]oncejobv1.DeliveryStatus{
	store.DeliveryStatusPending:      oncejobv1.DeliveryStatus_DELIVERY_STATUS_PENDING,
	store.DeliveryStatusDelivered:    oncejobv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED,
	store.DeliveryStatusDeadLettered: oncejobv1.DeliveryStatus_DELIVERY_STATUS_DEAD_LETTERED,
}

var deliveryStatusFromProto = map[oncejobv1.DeliveryStatus]store.DeliveryStatus{
	oncejobv1.DeliveryStatus_DELIVERY_STATUS_PENDING:       store.DeliveryStatusPending,
	oncejobv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED:     store.DeliveryStatusDelivered,
	oncejobv1.DeliveryStatus_DELIVERY_STATUS_DEAD_LETTERED: store.DeliveryStatusDeadLettered,
}

var deliveryOutcomeToProto = map[store.DeliveryOutcome]oncejobv1.DeliveryOutcome{
	store.DeliveryOutcomeDelivered:    oncejobv1.DeliveryOutcome_DELIVERY_OUTCOME_DELIVERED,
	store.DeliveryOutcomeFailed:       oncejobv1.DeliveryOutcome_DELIVERY_OUTCOME_FAILED,
	store.DeliveryOutcomeUnknown:      oncejobv1.DeliveryOutcome_DELIVERY_OUTCOME_UNKNOWN,
	store.DeliveryOutcomeDeadLettered: oncejobv1.DeliveryOutcome_DELIVERY_OUTCOME_DEAD_LETTERED,
	store.DeliveryOutcomeSinkDisabled: oncejobv1.DeliveryOutcome_DELIVERY_OUTCOME_SINK_DISABLED,
}

func deliveryToProto(d *store.Delivery) *oncejobv1.Delivery {
	pd := &oncejobv1.Delivery{
		Id: d.ID, EventId: d.EventID, EventType: d.EventType, Sink: d.Sink, JobId: d.JobID,
		Status: deliveryStatusToProto[d.Status], Attempts: d.Attempts,
		LastOutcome: deliveryOutcomeToProto[d.LastOutcome], LastError: d.LastError, ExternalRef: d.ExternalRef,
		CreateTime: timestamppb.New(d.CreatedAt), UpdateTime: timestamppb.New(d.UpdatedAt),
	}
	if d.Status == store.DeliveryStatusPending {
		pd.DueTime = timestamppb.New(d.DueAt)
	}
	if d.DeliveredAt != nil {
		pd.DeliverTime = timestamppb.New(*d.DeliveredAt)
	}
	return pd
}

func attemptToProto(a *store.DeliveryAttempt) *oncejobv1.DeliveryAttempt {
	return &oncejobv1.DeliveryAttempt{
		Attempt: a.Attempt, Relay: a.Relay, Outcome: deliveryOutcomeToProto[a.Outcome], HttpStatus: a.HTTPStatus,
		Error: a.Error, ExternalRef: a.ExternalRef, Duplicate: a.Duplicate, StartTime: timestamppb.New(a.StartedAt),
		LatencyMs: a.LatencyMS,
	}
}
