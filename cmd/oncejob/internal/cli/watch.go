package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Watch is `oncejob watch`.
func Watch(ctx context.Context, args []string) error {
	cmd := newClientCommand("watch", "[flags] JOB_ID", "Prints the job's events as they happen, each once, until it ends;\nexits with the code of its final status. --json prints one event per line.", 0)
	after := cmd.fs.Int("after-seq", 0, "start after the event with this seq")
	id, c, err := cmd.start(args, "JOB_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := cmd.cf.context(ctx)
	defer cancel()
	p := newProgress(os.Stdout, cmd.cf.json, false)
	for e, err := range c.Watch(ctx, id, clientsdk.AfterSeq(int32(*after))) {
		if err != nil {
			return waitError(err)
		}
		p.event(e)
	}
	p.done()
	job, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	return statusExit(job)
}

// Wait is `oncejob wait`.
func Wait(ctx context.Context, args []string) error {
	cmd := newClientCommand("wait", "[flags] JOB_ID", "Waits until the job ends, prints it, and exits with the code of its status.", 0)
	id, c, err := cmd.start(args, "JOB_ID")
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := cmd.cf.context(ctx)
	defer cancel()
	job, err := c.Wait(ctx, id)
	if err != nil {
		return waitError(err)
	}
	printJob(os.Stdout, job, cmd.cf.json)
	return statusExit(job)
}

// follow shows a job's events until it ends, then the job; events and job
// are wrapped as {"event": ...} and {"job": ...} lines with --json.
func follow(ctx context.Context, c *clientsdk.Client, id string, asJSON bool, envelope bool) (*oncejobv1.Job, error) {
	p := newProgress(os.Stdout, asJSON, envelope)
	for e, err := range c.Watch(ctx, id) {
		if err != nil {
			return nil, waitError(err)
		}
		p.event(e)
	}
	p.done()
	job, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if asJSON {
		cmdline.Say(os.Stdout, "{\"job\":%s}\n", protoJSON(job))
	} else {
		printJob(os.Stdout, job, false)
	}
	return job, nil
}

// waitError is exitUnknown when the wait ran out of time: the job goes on,
// its outcome unknown to this command.
func waitError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return cmdline.WithExitCode(exitUnknown, fmt.Errorf("the wait ended before the job did (--timeout): %w", err))
	}
	return err
}

// progress prints a job's events: one line each, or on a terminal one live
// line rewritten in place.
type progress struct {
	w        io.Writer
	json     bool
	envelope bool
	live     bool
	start    time.Time
	printed  bool
}

func newProgress(w io.Writer, asJSON, envelope bool) *progress {
	return &progress{w: w, json: asJSON, envelope: envelope, live: !asJSON && isTerminal(w), start: time.Now()}
}

func (p *progress) event(e *oncejobv1.JobEvent) {
	switch {
	case p.json && p.envelope:
		cmdline.Say(p.w, "{\"event\":%s}\n", protoJSON(e))
	case p.json:
		cmdline.Say(p.w, "%s\n", protoJSON(e))
	case p.live:
		cmdline.Say(p.w, "\r\033[K%5.1fs  %-17s %-15s attempt %d  %s", time.Since(p.start).Seconds(), statusName(e.GetStatus()), stageName(e.GetStage()), e.GetAttempt(), e.GetMessage())
		p.printed = true
	default:
		cmdline.Say(p.w, "  #%-3d %-17s %-15s attempt %d  %s\n", e.GetSeq(), statusName(e.GetStatus()), stageName(e.GetStage()), e.GetAttempt(), e.GetMessage())
	}
}

func (p *progress) done() {
	if p.live && p.printed {
		cmdline.Say(p.w, "\n")
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
