package cli

import (
	"context"
	"flag"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Get is `oncejob get`.
func Get(ctx context.Context, args []string) error {
	cmd := newClientCommand("get", "[flags] JOB_ID", "Shows a job; --json prints it as JSON.", 30*time.Second)
	id, c, err := cmd.start(args, "JOB_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	job, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	printJob(os.Stdout, job, cmd.cf.json)
	return nil
}

// List is `oncejob list`.
func List(ctx context.Context, args []string) error {
	cmd := newClientCommand("list", "[flags]", "Lists jobs, newest first; --json prints a JSON array.", 30*time.Second)
	statusFlag := cmd.fs.String("status", "", "only jobs in this status (e.g. dead_lettered)")
	pipeline := cmd.fs.String("pipeline", "", "only jobs of this pipeline")
	limit := cmd.fs.Int("limit", 50, "at most this many jobs, newest first (0: all)")
	_, c, err := cmd.start(args, "")
	if err != nil {
		return err
	}
	defer c.Close()
	req := &oncejobv1.ListJobsRequest{Pipeline: *pipeline}
	if *statusFlag != "" {
		if req.Status, err = parseStatus(*statusFlag); err != nil {
			return err
		}
	}
	if *limit > 0 {
		req.PageSize = int32(min(*limit, 500))
	}
	var jobs []*oncejobv1.Job
	for j, err := range c.List(ctx, req) {
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
		if *limit > 0 && len(jobs) == *limit {
			break
		}
	}
	if cmd.cf.json {
		printJSONArray(os.Stdout, jobs)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	cmdline.Say(tw, "ID\tSTATUS\tSTAGE\tPIPELINE\tATTEMPT\tCREATED\n")
	for _, j := range jobs {
		cmdline.Say(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", j.GetId(), statusName(j.GetStatus()), stageName(j.GetStage()), j.GetPipeline(), j.GetAttempt(), when(j.GetCreateTime()))
	}
	return tw.Flush()
}

// opCall makes one operator call.
type opCall = func(context.Context, *clientsdk.Client, ...clientsdk.CallOption) (*oncejobv1.Job, error)

// operatorCommand runs cancel, replay, resolve or approve, which share a
// shape: one job id, a reason, an optional key. extra registers the command's own
// flags and returns how to build its call once they are parsed.
func operatorCommand(ctx context.Context, args []string, name, about string, extra func(fs *flag.FlagSet) func(id, reason string) (opCall, error)) error {
	cmd := newClientCommand(name, "[flags] JOB_ID", about, 30*time.Second)
	reason := cmd.fs.String("reason", "", "why, recorded in the job's event")
	key := cmd.fs.String("key", "", "idempotency key (default: a new one for this command; reuse one to make a retry a replay)")
	build := extra(cmd.fs)
	id, c, err := cmd.start(args, "JOB_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	call, err := build(id, *reason)
	if err != nil {
		return err
	}
	var opts []clientsdk.CallOption
	if *key != "" {
		opts = append(opts, clientsdk.WithIdempotencyKey(*key))
	}
	job, err := call(ctx, c, opts...)
	if err != nil {
		return err
	}
	printJob(os.Stdout, job, cmd.cf.json)
	return nil
}

// Cancel is `oncejob cancel`.
func Cancel(ctx context.Context, args []string) error {
	return operatorCommand(ctx, args, "cancel", "Cancels the job: at once if no worker holds it, else at its worker's next heartbeat.",
		func(*flag.FlagSet) func(string, string) (opCall, error) {
			return func(id, reason string) (opCall, error) {
				return func(ctx context.Context, c *clientsdk.Client, o ...clientsdk.CallOption) (*oncejobv1.Job, error) {
					return c.Cancel(ctx, &oncejobv1.CancelJobRequest{JobId: id, Reason: reason}, o...)
				}, nil
			}
		})
}

// Replay is `oncejob replay`.
func Replay(ctx context.Context, args []string) error {
	return operatorCommand(ctx, args, "replay", "Queues a FAILED or DEAD_LETTERED job again with a fresh budget, from its last good checkpoint.",
		func(fs *flag.FlagSet) func(string, string) (opCall, error) {
			from := fs.String("from-stage", "", "re-run this stage and every later one (e.g. llm_done)")
			return func(id, reason string) (opCall, error) {
				req := &oncejobv1.ReplayJobRequest{JobId: id, Reason: reason}
				if *from != "" {
					var err error
					if req.FromStage, err = parseStage(*from); err != nil {
						return nil, err
					}
				}
				return func(ctx context.Context, c *clientsdk.Client, o ...clientsdk.CallOption) (*oncejobv1.Job, error) {
					return c.Replay(ctx, req, o...)
				}, nil
			}
		})
}

// Resolve is `oncejob resolve`.
func Resolve(ctx context.Context, args []string) error {
	return operatorCommand(ctx, args, "resolve", "Settles an OUTCOME_UNKNOWN job: --retry queues it again (same provider keys), --fail fails it.",
		func(fs *flag.FlagSet) func(string, string) (opCall, error) {
			retry := fs.Bool("retry", false, "queue the job again")
			fail := fs.Bool("fail", false, "fail the job")
			return func(id, reason string) (opCall, error) {
				if *retry == *fail {
					return nil, cmdline.UsageError("give exactly one of --retry and --fail")
				}
				req := &oncejobv1.ResolveJobRequest{JobId: id, Reason: reason, Resolution: oncejobv1.Resolution_RESOLUTION_RETRY}
				if *fail {
					req.Resolution = oncejobv1.Resolution_RESOLUTION_FAIL
				}
				return func(ctx context.Context, c *clientsdk.Client, o ...clientsdk.CallOption) (*oncejobv1.Job, error) {
					return c.Resolve(ctx, req, o...)
				}, nil
			}
		})
}

// Approve is `oncejob approve`.
func Approve(ctx context.Context, args []string) error {
	return operatorCommand(ctx, args, "approve", "Approves a job AWAITING_APPROVAL (it publishes its planned output), or rejects it with --reject.",
		func(fs *flag.FlagSet) func(string, string) (opCall, error) {
			reject := fs.Bool("reject", false, "reject instead: the job is CANCELLED")
			return func(id, reason string) (opCall, error) {
				req := &oncejobv1.ApproveJobRequest{JobId: id, Approve: !*reject, Reason: reason}
				return func(ctx context.Context, c *clientsdk.Client, o ...clientsdk.CallOption) (*oncejobv1.Job, error) {
					return c.Approve(ctx, req, o...)
				}, nil
			}
		})
}

// protoJSON is m as compact JSON, field names in lowerCamelCase as the
// gateway and grpcurl show them.
func protoJSON(m proto.Message) []byte {
	b, _ := protojson.Marshal(m)
	return b
}

// printJSONArray prints messages as a JSON array, one a line: the --json
// output of every listing.
func printJSONArray[M proto.Message](w io.Writer, msgs []M) {
	if len(msgs) == 0 {
		cmdline.Say(w, "[]\n")
		return
	}
	for i, j := range msgs {
		sep := ","
		if i == len(msgs)-1 {
			sep = ""
		}
		open := " "
		if i == 0 {
			open = "["
		}
		cmdline.Say(w, "%s%s%s\n", open, protoJSON(j), sep)
	}
	cmdline.Say(w, "]\n")
}

// printJob prints a job: indented JSON, or one field per line.
func printJob(w io.Writer, j *oncejobv1.Job, asJSON bool) {
	if asJSON {
		b, _ := protojson.MarshalOptions{Multiline: true}.Marshal(j)
		cmdline.Say(w, "%s\n", b)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		cmdline.Say(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
	}
	row("job", "%s", j.GetId())
	row("status", "%s", statusName(j.GetStatus()))
	row("stage", "%s", stageName(j.GetStage()))
	row("pipeline", "%s v%d (prompt %s, model profile %s)", j.GetPipeline(), j.GetPipelineVersion(), j.GetPromptVersion(), j.GetModelProfile())
	row("attempt", "%d (attempts spent: %d)", j.GetAttempt(), j.GetAttemptsSpent())
	if t := j.GetNextAttemptTime(); t != nil {
		row("next try", "%s (in %s)", when(t), time.Until(t.AsTime()).Round(time.Second))
	}
	if p := j.GetPriority(); p != oncejobv1.Priority_PRIORITY_UNSPECIFIED {
		row("priority", "%s", strings.ToLower(strings.TrimPrefix(p.String(), "PRIORITY_")))
	}
	if j.GetRunId() != "" {
		row("run", "%s", j.GetRunId())
	}
	row("key", "%s", j.GetIdempotencyKey())
	row("document", "%s %s, %d bytes", or(j.GetDocumentName(), "(unnamed)"), j.GetDocumentMediaType(), j.GetDocumentSizeBytes())
	if j.GetDeduplicatedFrom() != "" {
		row("deduplicated from", "%s", j.GetDeduplicatedFrom())
	}
	if u := j.GetUsage(); u != nil {
		row("usage", "%d LLM calls, %d prompt + %d completion tokens, cost %d micros", u.GetLlmCalls(), u.GetPromptTokens(), u.GetCompletionTokens(), u.GetCostMicros())
	}
	row("created", "%s", when(j.GetCreateTime()))
	if j.GetFinishTime() != nil {
		row("finished", "%s", when(j.GetFinishTime()))
	}
	if e := j.GetError(); e != nil {
		row("error", "%s: %s (retryable: %t)", e.GetCode(), e.GetMessage(), e.GetRetryable())
	}
	labels := make([]string, 0, len(j.GetLabels()))
	for k, v := range j.GetLabels() {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	if len(labels) > 0 {
		row("labels", "%s", strings.Join(labels, " "))
	}
	if j.GetOutput() != nil {
		row("output", "%s", protoJSON(j.GetOutput()))
	}
	_ = tw.Flush()
}

func when(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().Local().Format(time.DateTime)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
