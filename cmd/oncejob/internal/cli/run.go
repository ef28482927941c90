package cli

import (
	"context"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// RunStatus is `oncejob run status`.
func RunStatus(ctx context.Context, args []string) error {
	cmd := newClientCommand("run status", "[flags] RUN_ID", "Shows a run and its progress; --json prints it as JSON.", 30*time.Second)
	id, c, err := cmd.start(args, "RUN_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := c.GetRun(ctx, id)
	if err != nil {
		return err
	}
	printRun(run, cmd.cf.json)
	return nil
}

func printRun(run *oncejobv1.Run, asJSON bool) {
	if asJSON {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(run))
		return
	}
	p := run.GetProgress()
	cmdline.Say(os.Stdout, "run %s (%s), %s, pipeline %s, created %s\n", run.GetId(), run.GetName(),
		strings.TrimPrefix(run.GetState().String(), "RUN_STATE_"), run.GetPipeline(), when(run.GetCreateTime()))
	cmdline.Say(os.Stdout, "%s\n", progressLine(p, int(p.GetItems())))
	if run.GetProviderBatch() {
		cmdline.Say(os.Stdout, "provider batch: the items' calls go through the provider's batch API")
		if w := p.GetProviderBatchWindow(); w != nil {
			cmdline.Say(os.Stdout, ", waiting on batches (window %s)", w.AsDuration())
		}
		cmdline.Say(os.Stdout, "\n")
	}
	cmdline.Say(os.Stdout, "items %d: queued %d, running %d, retry-wait %d, awaiting approval %d, outcome unknown %d, succeeded %d, failed %d, dead-lettered %d, cancelled %d\n",
		p.GetItems(), p.GetQueued(), p.GetRunning(), p.GetRetryWait(), p.GetAwaitingApproval(), p.GetOutcomeUnknown(),
		p.GetSucceeded(), p.GetFailed(), p.GetDeadLettered(), p.GetCancelled())
	u := p.GetUsage()
	cmdline.Say(os.Stdout, "computed %d, reused %d; %d LLM calls, %d prompt + %d completion tokens, cost %d micros\n",
		p.GetComputed(), p.GetReused(), u.GetLlmCalls(), u.GetPromptTokens(), u.GetCompletionTokens(), u.GetCostMicros())
}

// RunWatch is `oncejob run watch`.
func RunWatch(ctx context.Context, args []string) error {
	cmd := newClientCommand("run watch", "[flags] RUN_ID", "Prints a run's progress as it changes until every item is terminal; --json: one run per line.", 0)
	after := cmd.fs.Int64("after-seq", 0, "start after this progress seq")
	id, c, err := cmd.start(args, "RUN_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := cmd.cf.context(ctx)
	defer cancel()
	for run, err := range c.WatchRun(ctx, id, *after) {
		if err != nil {
			return err
		}
		if cmd.cf.json {
			cmdline.Say(os.Stdout, "%s\n", protoJSON(run))
			continue
		}
		cmdline.Say(os.Stdout, "seq %d: %s\n", run.GetProgress().GetSeq(), progressLine(run.GetProgress(), int(run.GetProgress().GetItems())))
	}
	return nil
}

// RunList is `oncejob run list`.
func RunList(ctx context.Context, args []string) error {
	cmd := newClientCommand("run list", "[flags]", "Lists runs, newest first, with their progress.", 30*time.Second)
	limit := cmd.fs.Int("limit", 20, "at most this many runs (0: all)")
	_, c, err := cmd.start(args, "")
	if err != nil {
		return err
	}
	defer c.Close()
	var runs []*oncejobv1.Run
	for r, err := range c.ListRuns(ctx) {
		if err != nil {
			return err
		}
		runs = append(runs, r)
		if *limit > 0 && len(runs) == *limit {
			break
		}
	}
	if cmd.cf.json {
		printJSONArray(os.Stdout, runs)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	cmdline.Say(tw, "ID\tNAME\tSTATE\tITEMS\tSUCCEEDED\tFAILED\tREUSED\tCREATED\n")
	for _, r := range runs {
		p := r.GetProgress()
		cmdline.Say(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.GetId(), r.GetName(), strings.TrimPrefix(r.GetState().String(), "RUN_STATE_"),
			p.GetItems(), p.GetSucceeded(), p.GetFailed()+p.GetDeadLettered(), p.GetReused(), when(r.GetCreateTime()))
	}
	return tw.Flush()
}

// RunBatches is `oncejob run batches`.
func RunBatches(ctx context.Context, args []string) error {
	cmd := newClientCommand("run batches", "[flags] RUN_ID", "Lists the provider batches the LLM calls of a run's items went into, oldest first: the provider's status, the run's lines in each and those answered, the price class and the cost; --json prints them as a JSON array.", 30*time.Second)
	id, c, err := cmd.start(args, "RUN_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	batches, err := c.ListRunBatches(ctx, id)
	if err != nil {
		return err
	}
	if cmd.cf.json {
		printJSONArray(os.Stdout, batches)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	cmdline.Say(tw, "BATCH\tSTATUS\tLINES\tANSWERED\tBILLED\tPRICE\tCOST_MICROS\tCREATED\tEXPIRES\n")
	for _, b := range batches {
		cmdline.Say(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", b.GetBatchId(), b.GetStatus(), b.GetLines(), b.GetAnsweredLines(),
			b.GetBilledLines(), b.GetPriceClass(), b.GetCostMicros(), when(b.GetCreateTime()), when(b.GetExpireTime()))
	}
	return tw.Flush()
}

// RunRetryFailures is `oncejob run retry-failures`.
func RunRetryFailures(ctx context.Context, args []string) error {
	cmd := newClientCommand("run retry-failures", "[flags] RUN_ID", "Replays every FAILED and DEAD_LETTERED job of a run from its last checkpoint, once per --key.", 30*time.Second)
	key := cmd.fs.String("key", "", "idempotency key (default: a new one per command); the same key again replays nothing more")
	reason := cmd.fs.String("reason", "", "why, recorded in each replayed job's event")
	id, c, err := cmd.start(args, "RUN_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	var opts []clientsdk.CallOption
	if *key != "" {
		opts = append(opts, clientsdk.WithIdempotencyKey(*key))
	}
	resp, err := c.RetryRunFailures(ctx, &oncejobv1.RetryRunFailuresRequest{RunId: id, Reason: *reason}, opts...)
	if err != nil {
		return err
	}
	if cmd.cf.json {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(resp))
		return nil
	}
	cmdline.Say(os.Stdout, "replayed %d jobs of run %s\n", resp.GetReplayed(), id)
	return nil
}

// RunCancel is `oncejob run cancel`.
func RunCancel(ctx context.Context, args []string) error {
	cmd := newClientCommand("run cancel", "[flags] RUN_ID", "Cancels a run: it accepts no more items, and the jobs it created that are not terminal are cancelled.", 30*time.Second)
	reason := cmd.fs.String("reason", "", "why, recorded in each cancelled job's event")
	id, c, err := cmd.start(args, "RUN_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.CancelRun(ctx, &oncejobv1.CancelRunRequest{RunId: id, Reason: *reason})
	if err != nil {
		return err
	}
	if cmd.cf.json {
		cmdline.Say(os.Stdout, "%s\n", protoJSON(resp))
		return nil
	}
	cmdline.Say(os.Stdout, "run %s cancelled: %d jobs cancelled or asked to stop\n", id, resp.GetCancelled())
	return nil
}
