package cli

import (
	"context"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// `oncejob deliveries list|retry`, on the Go SDK.

// DeliveriesList is `oncejob deliveries list`.
func DeliveriesList(ctx context.Context, args []string) error {
	cmd := newClientCommand("deliveries list", "[flags]", "Lists deliveries of events to sinks: dead letters first, then pending, then delivered; and the disabled sinks.", 30*time.Second)
	job := cmd.fs.String("job", "", "only this job's deliveries")
	status := cmd.fs.String("status", "", "only pending, delivered or dead_lettered")
	sink := cmd.fs.String("sink", "", "only this sink's deliveries")
	pageSize := cmd.fs.Int("page-size", 50, "deliveries per page (at most 500)")
	pageToken := cmd.fs.String("page-token", "", "the next page, as printed after the previous one")
	attempts := cmd.fs.Bool("attempts", false, "with each delivery's journal of attempts")
	_, c, err := cmd.start(args, "")
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	req := &oncejobv1.ListDeliveriesRequest{JobId: *job, Sink: *sink, PageSize: int32(min(max(*pageSize, 0), 500)), PageToken: *pageToken, IncludeAttempts: *attempts}
	if *status != "" {
		v, ok := oncejobv1.DeliveryStatus_value["DELIVERY_STATUS_"+strings.ToUpper(*status)]
		if !ok || v == 0 {
			return cmdline.UsageError("--status %q: want pending, delivered or dead_lettered", *status)
		}
		req.Status = oncejobv1.DeliveryStatus(v)
	}
	resp, err := c.ListDeliveries(ctx, req)
	if err != nil {
		return err
	}
	if cmd.cf.json {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(resp))
		return nil
	}
	printDeliveries(os.Stdout, resp)
	return nil
}

// DeliveriesRetry is `oncejob deliveries retry`.
func DeliveriesRetry(ctx context.Context, args []string) error {
	cmd := newClientCommand("deliveries retry", "(--delivery ID | --sink NAME)", "Queues a dead-lettered delivery again with a fresh budget, or every dead letter of a sink (enabling the sink). A repeat queues nothing again.", 30*time.Second)
	delivery := cmd.fs.Int64("delivery", 0, "the dead-lettered delivery's id")
	sink := cmd.fs.String("sink", "", "every dead-lettered delivery of this sink; enables the sink")
	_, c, err := cmd.start(args, "")
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	req := &oncejobv1.RetryDeliveryRequest{}
	switch {
	case (*delivery == 0) == (*sink == ""):
		return cmdline.UsageError("give exactly one of --delivery and --sink")
	case *delivery != 0:
		req.Target = &oncejobv1.RetryDeliveryRequest_DeliveryId{DeliveryId: *delivery}
	default:
		req.Target = &oncejobv1.RetryDeliveryRequest_Sink{Sink: *sink}
	}
	resp, err := c.RetryDelivery(ctx, req)
	if err != nil {
		return err
	}
	if cmd.cf.json {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(resp))
		return nil
	}
	if resp.GetSinkEnabled() {
		cmdline.Say(os.Stdout, "sink %s enabled again\n", *sink)
	}
	cmdline.Say(os.Stdout, "%d deliveries queued:\n", len(resp.GetDeliveries()))
	printDeliveries(os.Stdout, &oncejobv1.ListDeliveriesResponse{Deliveries: resp.GetDeliveries()})
	return nil
}

func printDeliveries(w io.Writer, list *oncejobv1.ListDeliveriesResponse) {
	for _, s := range list.GetDisabledSinks() {
		cmdline.Say(w, "SINK DISABLED: %s since %s: %s (enable: oncejob deliveries retry --sink %s)\n", s.GetSink(), when(s.GetDisableTime()), s.GetReason(), s.GetSink())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cmdline.Say(tw, "ID\tSTATUS\tSINK\tEVENT\tATTEMPTS\tLAST\tREF / ERROR\n")
	for _, d := range list.GetDeliveries() {
		detail := d.GetExternalRef()
		if d.GetStatus() != oncejobv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED {
			detail = d.GetLastError()
		}
		cmdline.Say(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.GetId(), strings.TrimPrefix(d.GetStatus().String(), "DELIVERY_STATUS_"),
			d.GetSink(), d.GetEventId(), d.GetAttempts(), strings.TrimPrefix(d.GetLastOutcome().String(), "DELIVERY_OUTCOME_"), truncateText(detail, 80))
		for _, a := range d.GetAttemptLog() {
			cmdline.Say(tw, "\t  attempt %d\t%s\t%s\tHTTP %d\t%dms\t%s\n", a.GetAttempt(), a.GetRelay(),
				strings.TrimPrefix(a.GetOutcome().String(), "DELIVERY_OUTCOME_"), a.GetHttpStatus(), a.GetLatencyMs(), truncateText(a.GetError()+a.GetExternalRef(), 60))
		}
	}
	_ = tw.Flush()
	if list.GetNextPageToken() != "" {
		cmdline.Say(w, "more: --page-token %s\n", list.GetNextPageToken())
	}
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
