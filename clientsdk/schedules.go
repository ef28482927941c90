package clientsdk

import (
	"context"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Schedule submits a job template at the slots of a cron expression or an
// interval (ScheduleService).
type Schedule = oncejobv1.Schedule

// ScheduleKey derives the idempotency key of a CreateSchedule request:
// WorkID of kind "oncejob.schedule", version 1, over the request as JSON.
// So creating the same schedule again (a deploy script run twice) is one
// schedule.
func ScheduleKey(req *oncejobv1.CreateScheduleRequest) (string, error) {
	b, err := protojson.Marshal(req)
	if err != nil {
		return "", err
	}
	return WorkID("oncejob.schedule", 1, json.RawMessage(b))
}

// CreateSchedule creates a schedule, or returns the one its key created.
// The key is the caller's (WithIdempotencyKey) or ScheduleKey(req).
func (c *Client) CreateSchedule(ctx context.Context, req *oncejobv1.CreateScheduleRequest, opts ...CallOption) (*Schedule, error) {
	o := c.callOptions(opts)
	key := o.key
	if key == "" {
		var err error
		if key, err = ScheduleKey(req); err != nil {
			return nil, err
		}
	}
	var resp oncejobv1.CreateScheduleResponse
	err := c.call(ctx, oncejobv1.ScheduleService_CreateSchedule_FullMethodName, req, &resp, key, o)
	return resp.GetSchedule(), err
}

// ListSchedules returns one page of the caller's schedules, each with its
// latest slots; pass NextPageToken as the next request's PageToken.
func (c *Client) ListSchedules(ctx context.Context, req *oncejobv1.ListSchedulesRequest, opts ...CallOption) (*oncejobv1.ListSchedulesResponse, error) {
	var resp oncejobv1.ListSchedulesResponse
	err := c.call(ctx, oncejobv1.ScheduleService_ListSchedules_FullMethodName, req, &resp, "", c.callOptions(opts))
	return &resp, err
}

// GetSchedule returns one of the caller's schedules, its template with its
// document (ListSchedules leaves documents out unless asked).
func (c *Client) GetSchedule(ctx context.Context, id string, opts ...CallOption) (*Schedule, error) {
	var resp oncejobv1.GetScheduleResponse
	err := c.call(ctx, oncejobv1.ScheduleService_GetSchedule_FullMethodName, &oncejobv1.GetScheduleRequest{ScheduleId: id}, &resp, "", c.callOptions(opts))
	return resp.GetSchedule(), err
}

// PauseSchedule stops a schedule firing; pausing a paused one returns it.
func (c *Client) PauseSchedule(ctx context.Context, id string, opts ...CallOption) (*Schedule, error) {
	var resp oncejobv1.PauseScheduleResponse
	err := c.call(ctx, oncejobv1.ScheduleService_PauseSchedule_FullMethodName, &oncejobv1.PauseScheduleRequest{ScheduleId: id}, &resp, "", c.callOptions(opts))
	return resp.GetSchedule(), err
}

// ResumeSchedule lets a paused schedule fire again from its next slot.
func (c *Client) ResumeSchedule(ctx context.Context, id string, opts ...CallOption) (*Schedule, error) {
	var resp oncejobv1.ResumeScheduleResponse
	err := c.call(ctx, oncejobv1.ScheduleService_ResumeSchedule_FullMethodName, &oncejobv1.ResumeScheduleRequest{ScheduleId: id}, &resp, "", c.callOptions(opts))
	return resp.GetSchedule(), err
}

// DeleteSchedule deletes a schedule; its jobs stay. A deleted schedule is
// ErrNotFound.
func (c *Client) DeleteSchedule(ctx context.Context, id string, opts ...CallOption) error {
	var resp oncejobv1.DeleteScheduleResponse
	return c.call(ctx, oncejobv1.ScheduleService_DeleteSchedule_FullMethodName, &oncejobv1.DeleteScheduleRequest{ScheduleId: id}, &resp, "", c.callOptions(opts))
}
