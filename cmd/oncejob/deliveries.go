package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// runDeliveries is `oncejob deliveries list|retry`, a client of a running
// server's DeliveryService. It is written on the generated client: the Go
// SDK (clientsdk) is not on main yet; move it there when it is.
func runDeliveries(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "retry") {
		fmt.Fprintln(os.Stderr, "usage: oncejob deliveries list [--job ID] [--status pending|delivered|dead_lettered] [--sink NAME] [--attempts] [--json]\n       oncejob deliveries retry (--delivery ID | --sink NAME) [--json]")
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("deliveries "+args[0], flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7070", "server address (plaintext gRPC)")
	apiKey := fs.String("api-key", "", "API key (prefer ONCEJOB_API_KEY); none in dev mode")
	asJSON := fs.Bool("json", false, "print the response as JSON")
	job := fs.String("job", "", "list: only this job's deliveries")
	status := fs.String("status", "", "list: only pending, delivered or dead_lettered")
	sink := fs.String("sink", "", "list: only this sink's; retry: every dead-lettered delivery of this sink")
	pageSize := fs.Int("page-size", 50, "list: deliveries per page")
	pageToken := fs.String("page-token", "", "list: the next_page_token of the previous page")
	attempts := fs.Bool("attempts", false, "list: with each delivery's journal")
	delivery := fs.Int64("delivery", 0, "retry: the delivery's id")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	client := oncejobv1.NewDeliveryServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if *apiKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*apiKey)
	}

	var resp proto.Message
	switch args[0] {
	case "list":
		st := oncejobv1.DeliveryStatus_DELIVERY_STATUS_UNSPECIFIED
		if *status != "" {
			v, ok := oncejobv1.DeliveryStatus_value["DELIVERY_STATUS_"+strings.ToUpper(*status)]
			if !ok {
				return fmt.Errorf("--status %q: want pending, delivered or dead_lettered", *status)
			}
			st = oncejobv1.DeliveryStatus(v)
		}
		list, err := client.ListDeliveries(ctx, &oncejobv1.ListDeliveriesRequest{
			JobId: *job, Status: st, Sink: *sink, PageSize: int32(*pageSize), PageToken: *pageToken, IncludeAttempts: *attempts,
		})
		if err != nil {
			return err
		}
		if !*asJSON {
			printDeliveries(list)
			return nil
		}
		resp = list
	case "retry":
		req := &oncejobv1.RetryDeliveryRequest{}
		switch {
		case (*delivery == 0) == (*sink == ""):
			return errors.New("retry: give exactly one of --delivery and --sink")
		case *delivery != 0:
			req.Target = &oncejobv1.RetryDeliveryRequest_DeliveryId{DeliveryId: *delivery}
		default:
			req.Target = &oncejobv1.RetryDeliveryRequest_Sink{Sink: *sink}
		}
		retry, err := client.RetryDelivery(ctx, req)
		if err != nil {
			return err
		}
		if !*asJSON {
			if retry.GetSinkEnabled() {
				fmt.Printf("sink %s enabled again\n", *sink)
			}
			fmt.Printf("%d deliveries queued:\n", len(retry.GetDeliveries()))
			printDeliveries(&oncejobv1.ListDeliveriesResponse{Deliveries: retry.GetDeliveries()})
			return nil
		}
		resp = retry
	}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func printDeliveries(list *oncejobv1.ListDeliveriesResponse) {
	for _, s := range list.GetDisabledSinks() {
		fmt.Printf("SINK DISABLED: %s since %s: %s (enable: oncejob deliveries retry --sink %s)\n", s.GetSink(), s.GetDisableTime().AsTime().Format(time.RFC3339), s.GetReason(), s.GetSink())
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "ID\tSTATUS\tSINK\tEVENT\tATTEMPTS\tLAST\tREF / ERROR")
	for _, d := range list.GetDeliveries() {
		detail := d.GetExternalRef()
		if d.GetStatus() != oncejobv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED {
			detail = d.GetLastError()
		}
		_, _ = fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.GetId(),
			strings.TrimPrefix(d.GetStatus().String(), "DELIVERY_STATUS_"), d.GetSink(), d.GetEventId(), d.GetAttempts(),
			strings.TrimPrefix(d.GetLastOutcome().String(), "DELIVERY_OUTCOME_"), truncateText(detail, 80))
		for _, a := range d.GetAttemptLog() {
			_, _ = fmt.Fprintf(w, "\t  attempt %d\t%s\t%s\tHTTP %d\t%dms\t%s\n", a.GetAttempt(), a.GetRelay(),
				strings.TrimPrefix(a.GetOutcome().String(), "DELIVERY_OUTCOME_"), a.GetHttpStatus(), a.GetLatencyMs(), truncateText(a.GetError()+a.GetExternalRef(), 60))
		}
	}
	_ = w.Flush()
	if list.GetNextPageToken() != "" {
		fmt.Printf("more: --page-token %s\n", list.GetNextPageToken())
	}
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
