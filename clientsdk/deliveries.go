package clientsdk

import (
	"context"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// ListDeliveries returns one page of the deliveries of the tenant's events
// to its sinks - dead letters first, then pending, then delivered - and the
// tenant's disabled sinks. Pass the response's NextPageToken as the next
// request's PageToken. Read-only, so retried freely.
func (c *Client) ListDeliveries(ctx context.Context, req *oncejobv1.ListDeliveriesRequest, opts ...CallOption) (*oncejobv1.ListDeliveriesResponse, error) {
	var resp oncejobv1.ListDeliveriesResponse
	err := c.call(ctx, oncejobv1.DeliveryService_ListDeliveries_FullMethodName, req, &resp, "", c.callOptions(opts))
	return &resp, err
}

// RetryDelivery queues a dead-lettered delivery again (or every dead letter
// of a sink, enabling the sink). It needs no idempotency key: only a
// dead-lettered delivery moves, so a retry of the call finds it pending and
// queues nothing again. A delivered delivery is *PreconditionError.
func (c *Client) RetryDelivery(ctx context.Context, req *oncejobv1.RetryDeliveryRequest, opts ...CallOption) (*oncejobv1.RetryDeliveryResponse, error) {
	var resp oncejobv1.RetryDeliveryResponse
	err := c.call(ctx, oncejobv1.DeliveryService_RetryDelivery_FullMethodName, req, &resp, "", c.callOptions(opts))
	return &resp, err
}
