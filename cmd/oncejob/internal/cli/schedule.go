package cli

import (
	"context"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// ScheduleCreate is `oncejob schedule create`.
func ScheduleCreate(ctx context.Context, args []string) error {
	cmd := newClientCommand("schedule create", "[flags] FILE|-", `Creates a schedule that submits FILE (- for stdin) at each slot of --cron
(in --tz) or --every. Each slot fires at most once, however many servers
run; the same command again is the same schedule.`, 30*time.Second)
	fs := cmd.fs
	name := fs.String("name", "", "the schedule's name (required)")
	cronExpr := fs.String("cron", "", `a cron expression: "*/5 * * * *", with seconds "*/10 * * * * *", or @hourly`)
	tz := fs.String("tz", "", "the IANA time zone of --cron (default UTC)")
	every := fs.Duration("every", 0, "an interval instead of --cron (at least 100ms); slots at its multiples since the epoch")
	pipeline := fs.String("pipeline", "summarize", "the pipeline to run")
	var params, labels keyValues
	fs.Var(&params, "param", "a parameter k=v (repeatable)")
	fs.Var(&labels, "label", "a label k=v (repeatable)")
	overlap := fs.String("overlap", "skip", "while the last job runs: skip, buffer_one or allow")
	catchup := fs.String("catchup", "none", "slots missed while every server was down: none or latest")
	misfire := fs.Duration("misfire", time.Minute, "how late a slot may still fire")
	key := fs.String("key", "", "idempotency key (default: derived from the request)")
	path, c, err := cmd.start(args, "FILE (or -)")
	if err != nil {
		return err
	}
	defer c.Close()
	job, err := submitRequest(path, *pipeline, "", "", "", params, labels)
	if err != nil {
		return err
	}
	req := &oncejobv1.CreateScheduleRequest{
		Name: *name, TimeZone: *tz, Job: job, MisfireThreshold: durationpb.New(*misfire),
		Overlap: oncejobv1.OverlapPolicy(oncejobv1.OverlapPolicy_value["OVERLAP_POLICY_"+strings.ToUpper(*overlap)]),
		Catchup: oncejobv1.CatchupPolicy(oncejobv1.CatchupPolicy_value["CATCHUP_POLICY_"+strings.ToUpper(*catchup)]),
	}
	if req.Overlap == 0 {
		return cmdline.UsageError("--overlap must be skip, buffer_one or allow")
	}
	if req.Catchup == 0 {
		return cmdline.UsageError("--catchup must be none or latest")
	}
	if *every != 0 {
		req.Spec = &oncejobv1.CreateScheduleRequest_Interval{Interval: durationpb.New(*every)}
	} else {
		req.Spec = &oncejobv1.CreateScheduleRequest_Cron{Cron: *cronExpr}
	}
	var opts []clientsdk.CallOption
	if *key != "" {
		opts = append(opts, clientsdk.WithIdempotencyKey(*key))
	}
	sch, err := c.CreateSchedule(ctx, req, opts...)
	if err != nil {
		return err
	}
	if cmd.cf.json {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(sch))
		return nil
	}
	cmdline.Say(os.Stdout, "schedule %s (%s): next slot %s\n", sch.GetId(), sch.GetName(), sch.GetNextSlotTime().AsTime().Format(time.RFC3339Nano))
	return nil
}

// ScheduleList is `oncejob schedule list`.
func ScheduleList(ctx context.Context, args []string) error {
	cmd := newClientCommand("schedule list", "[flags]", "Lists schedules, newest first, with their latest slots.", 30*time.Second)
	_, c, err := cmd.start(args, "")
	if err != nil {
		return err
	}
	defer c.Close()
	var all []*oncejobv1.Schedule
	req := &oncejobv1.ListSchedulesRequest{PageSize: 100}
	for {
		resp, err := c.ListSchedules(ctx, req)
		if err != nil {
			return err
		}
		all = append(all, resp.GetSchedules()...)
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if cmd.cf.json {
		printJSONArray(os.Stdout, all)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	cmdline.Say(tw, "ID\tNAME\tSPEC\tOVERLAP\tPAUSED\tNEXT SLOT\tLAST SLOT\n")
	for _, s := range all {
		spec := s.GetCron()
		if spec == "" {
			spec = "every " + s.GetInterval().AsDuration().String()
		} else if s.GetTimeZone() != "" {
			spec += " (" + s.GetTimeZone() + ")"
		}
		last := "-"
		if sl := s.GetRecentSlots(); len(sl) > 0 {
			last = strings.ToLower(strings.TrimPrefix(sl[0].GetOutcome().String(), "SLOT_OUTCOME_"))
			if sl[0].GetReason() != "" {
				last += ": " + sl[0].GetReason()
			}
		}
		cmdline.Say(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\n", s.GetId(), s.GetName(), spec,
			strings.ToLower(strings.TrimPrefix(s.GetOverlap().String(), "OVERLAP_POLICY_")), s.GetPaused(),
			s.GetNextSlotTime().AsTime().Format(time.RFC3339), last)
	}
	return tw.Flush()
}

// scheduleIDCommand runs pause, resume or delete: one schedule id, one call.
func scheduleIDCommand(ctx context.Context, args []string, name, about string, call func(context.Context, *clientsdk.Client, string) (*oncejobv1.Schedule, error)) error {
	cmd := newClientCommand("schedule "+name, "[flags] SCHEDULE_ID", about, 30*time.Second)
	id, c, err := cmd.start(args, "SCHEDULE_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	sch, err := call(ctx, c, id)
	if err != nil {
		return err
	}
	if cmd.cf.json && sch != nil {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(sch))
		return nil
	}
	cmdline.Say(os.Stdout, "schedule %s: %s\n", id, name+"d")
	return nil
}

// SchedulePause is `oncejob schedule pause`.
func SchedulePause(ctx context.Context, args []string) error {
	return scheduleIDCommand(ctx, args, "pause", "Stops a schedule firing; pausing a paused schedule changes nothing.",
		func(ctx context.Context, c *clientsdk.Client, id string) (*oncejobv1.Schedule, error) {
			return c.PauseSchedule(ctx, id)
		})
}

// ScheduleResume is `oncejob schedule resume`.
func ScheduleResume(ctx context.Context, args []string) error {
	return scheduleIDCommand(ctx, args, "resume", "Lets a paused schedule fire again, from its next slot.",
		func(ctx context.Context, c *clientsdk.Client, id string) (*oncejobv1.Schedule, error) {
			return c.ResumeSchedule(ctx, id)
		})
}

// ScheduleDelete is `oncejob schedule delete`.
func ScheduleDelete(ctx context.Context, args []string) error {
	return scheduleIDCommand(ctx, args, "delete", "Deletes a schedule; its jobs stay.",
		func(ctx context.Context, c *clientsdk.Client, id string) (*oncejobv1.Schedule, error) {
			return nil, c.DeleteSchedule(ctx, id)
		})
}
