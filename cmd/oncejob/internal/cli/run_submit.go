package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm"
)

// maxItemLine bounds one line of an items file.
const maxItemLine = 16 << 20

// runSubmitSummary is what `run submit` did, printed at the end (and as
// --json).
type runSubmitSummary struct {
	RunID string `json:"run_id"`
	Lines int    `json:"lines"`
	// Sent: items handed to the server (answered or not).
	Sent int `json:"sent"`
	// Created: new jobs this invocation made for the run's items.
	Created int `json:"created"`
	// AlreadyInRun: items an earlier invocation had submitted.
	AlreadyInRun int `json:"already_in_run"`
	// AlreadyDone: items whose job was already terminal when submitted
	// (done by an earlier invocation, or reused work).
	AlreadyDone int `json:"already_done"`
	// Reused: items that joined as no new work (existing or deduplicated).
	Reused int `json:"reused"`
	// Deduplicated: of Reused, those whose computation already existed
	// (another job's result, outcome DEDUPLICATED).
	Deduplicated int `json:"deduplicated"`
	// Invalid: lines that are not an item (bad JSON, no document, ...).
	Invalid int `json:"invalid"`
	// Refused: items the server refused (their own errors).
	Refused int `json:"refused"`
	// Final is the run's progress at the end; State its state.
	Final  json.RawMessage `json:"progress,omitempty"`
	State  string          `json:"state,omitempty"`
	Errors []string        `json:"errors,omitempty"` // "line N: why"
	mu     sync.Mutex
}

// runSubmitAbout is run submit's usage text.
const runSubmitAbout = `Submits the items of a JSONL file (one JSON object per line) into a run, in
batches. An item holds its document as "text" (or a file, "path"), and
optionally "media_type", "name", "model_profile", "params" (an object) and
"labels" (an object of strings); other fields are kept for --id-field.

Each item's key is derived from --id-field's value (a URL is normalised:
tracking parameters, fragment, host case, default port and query order do
not count) or, without it, from the whole request (SubmitKey). So the same
command again - after a kill, a crash, a lost connection - finishes the
run: items already submitted are answered from the run, only the others
are new work. A line that is not an item is reported with its number and
skipped; the exit status is then 1.`

// runSubmitFlags are run submit's own flags, beside the client flags.
type runSubmitFlags struct {
	pipeline, runName, idField, profile string
	providerBatch, wait                 bool
	params, labels                      keyValues
	batch                               int
}

func (f *runSubmitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.pipeline, "pipeline", "summarize", "the pipeline of the run's items")
	fs.StringVar(&f.runName, "run", "", "the run's name (required); the same name, pipeline, params, labels and --provider-batch are the same run")
	fs.StringVar(&f.idField, "id-field", "", "derive each item's key from this field (a URL is normalised); default: from the whole item")
	fs.StringVar(&f.profile, "model-profile", "", "the model profile of the run's items (default: the pipeline's first)")
	fs.BoolVar(&f.providerBatch, "provider-batch", false, "send the items' LLM calls through the provider's batch API (about half the price, answered within 24 h): each item's profile becomes its batch twin (\"<profile>@batch\"); refused when the server's provider has no batch API")
	fs.Var(&f.params, "param", "a parameter of every item, k=v (repeatable; v is JSON if it parses); an item's own win")
	fs.Var(&f.labels, "label", "a label of every item, k=v (repeatable)")
	fs.IntVar(&f.batch, "batch", clientsdk.MaxBatch, "items per SubmitJobs call (1-1000)")
	fs.BoolVar(&f.wait, "wait", false, "wait until every item of the run is terminal; exit 3 if any FAILED or was DEAD_LETTERED")
}

// validate checks the flags once, before anything is sent.
func (f *runSubmitFlags) validate() error {
	if f.runName == "" {
		return cmdline.UsageError("--run NAME is required")
	}
	if f.batch < 1 || f.batch > clientsdk.MaxBatch {
		return cmdline.UsageError("--batch must be 1-%d", clientsdk.MaxBatch)
	}
	return nil
}

// RunSubmit is `oncejob run submit`.
func RunSubmit(ctx context.Context, args []string) error {
	cmd := newClientCommand("run submit", "[flags] ITEMS.jsonl|-", runSubmitAbout, 0)
	// A run outlives a server's restart: about a minute of retries.
	cmd.retryLonger(20)
	var f runSubmitFlags
	f.register(cmd.fs)
	path, c, err := cmd.start(args, "ITEMS.jsonl (or -)")
	if err != nil {
		return err
	}
	defer c.Close()
	if err := f.validate(); err != nil {
		return err
	}
	ctx, cancel := cmd.cf.context(ctx)
	defer cancel()

	defaults, err := runDefaults(f.pipeline, f.profile, f.params, f.labels)
	if err != nil {
		return err
	}
	in, err := openItems(path)
	if err != nil {
		return fmt.Errorf("cannot read the items: %w", err)
	}
	defer func() { _ = in.Close() }() // read only: nothing to lose

	// The run is created with the first batch of valid items, not before:
	// a missing file or one without an item leaves no empty run behind
	// in run list and the console (issue 30).
	sum := &runSubmitSummary{}
	show := newRunProgress(os.Stdout, cmd.cf.json)
	var run *oncejobv1.Run
	stop := func() {}
	startRun := func() (string, error) {
		if run != nil {
			return run.GetId(), nil
		}
		r, err := c.CreateRun(ctx, &oncejobv1.CreateRunRequest{
			Name: f.runName, Pipeline: defaults.GetPipeline(), ModelProfile: defaults.GetModelProfile(),
			Params: defaults.GetParams(), Labels: defaults.GetLabels(), ProviderBatch: f.providerBatch,
		})
		if err != nil {
			return "", err
		}
		run = r
		sum.mu.Lock()
		sum.RunID = r.GetId()
		sum.mu.Unlock()
		show.header(r)
		stop = show.poll(ctx, c, r.GetId(), sum)
		return r.GetId(), nil
	}
	err = submitItems(ctx, c, in, startRun, defaults, f.idField, f.batch, sum)
	stop()
	if err != nil {
		return stopped(ctx, err, sum)
	}
	if run == nil {
		cmdline.Say(os.Stderr, "the input has no items: run %q not created, nothing to wait for\n", f.runName)
		show.done(nil, sum)
		return sum.exit(nil, f.wait)
	}
	final, err := finalRun(ctx, c, run, f.wait, show, sum)
	if err != nil {
		return err
	}
	show.done(final, sum)
	return sum.exit(final, f.wait)
}

// finalRun is the run once its items are in: at once, or, with wait, when
// every item is terminal, its progress shown as it changes (at once too
// when the run has no item).
func finalRun(ctx context.Context, c *clientsdk.Client, run *oncejobv1.Run, wait bool, show *runProgress, sum *runSubmitSummary) (*oncejobv1.Run, error) {
	now, err := c.GetRun(ctx, run.GetId())
	if !wait || err != nil {
		return now, err
	}
	// A run with no item is never complete (items may come later): with
	// every line refused or none read, there is nothing to wait for.
	if now.GetProgress().GetItems() == 0 {
		cmdline.Say(os.Stderr, "run %s has no items: nothing to wait for\n", run.GetId())
		return now, nil
	}
	final := now
	for r, err := range c.WatchRun(ctx, run.GetId(), 0) {
		if err != nil {
			return nil, stopped(ctx, err, sum)
		}
		final = r
		show.update(r, sum)
	}
	return final, nil
}

// exit is run submit's error once the run is final: exit status 1 when a
// line was no item or an item was refused; with wait, 3 when an item
// FAILED or was DEAD_LETTERED.
func (sum *runSubmitSummary) exit(final *oncejobv1.Run, wait bool) error {
	switch p := final.GetProgress(); {
	case sum.Invalid > 0 || sum.Refused > 0:
		return cmdline.WithExitCode(cmdline.ExitError, fmt.Errorf("%d lines were not items and %d items were refused (see above)", sum.Invalid, sum.Refused))
	case wait && p.GetFailed()+p.GetDeadLettered() > 0:
		return cmdline.WithExitCode(exitFailed, fmt.Errorf("%d items FAILED and %d were DEAD_LETTERED; replay them with: oncejob run retry-failures %s", p.GetFailed(), p.GetDeadLettered(), final.GetId()))
	}
	return nil
}

// stopped is the error of a run submit that ended early. Stopped by a
// signal (Ctrl-C, SIGTERM), it first prints what was done so far and the
// command that finishes the run: the same command line, which submits
// again under the same keys, so the items already in are answered from
// the run and only the others are new work (main then exits 128+signal).
func stopped(ctx context.Context, err error, sum *runSubmitSummary) error {
	se, ok := cmdline.Interrupted(ctx)
	if !ok {
		return err
	}
	sum.mu.Lock()
	defer sum.mu.Unlock()
	accepted := sum.Created + sum.AlreadyInRun + sum.Reused
	cmdline.Say(os.Stderr, "\ninterrupted (%s): run %s: %d lines read; %d items sent, %d accepted (%d new, %d already in the run, %d reused, of which %d deduplicated), %d failed (%d refused, %d invalid lines), %d unanswered\n",
		se.Name(), sum.RunID, sum.Lines, sum.Sent, accepted, sum.Created, sum.AlreadyInRun, sum.Reused, sum.Deduplicated,
		sum.Refused+sum.Invalid, sum.Refused, sum.Invalid, sum.Sent-accepted-sum.Refused)
	cmdline.Say(os.Stderr, "resume with the same command (items already sent are not submitted twice):\n  %s\n", shellCommand(os.Args))
	return err
}

// shellCommand quotes args for a POSIX shell.
func shellCommand(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runDefaults is the request every item starts from, and `submit`'s without
// its document.
func runDefaults(pipeline, profile string, params, labels keyValues) (*oncejobv1.SubmitJobRequest, error) {
	p, err := params.split(true)
	if err != nil {
		return nil, err
	}
	ps, err := structpb.NewStruct(p)
	if err != nil {
		return nil, cmdline.UsageError("--param: %v", err)
	}
	l, err := labels.split(false)
	if err != nil {
		return nil, err
	}
	ls := map[string]string{}
	for k, v := range l {
		ls[k] = v.(string)
	}
	return &oncejobv1.SubmitJobRequest{Pipeline: pipeline, ModelProfile: profile, Params: ps, Labels: ls}, nil
}

func openItems(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path) //nolint:gosec // G304: the file named on the command line is the one to read
}

// submitItems reads the items line by line and submits them in batches
// into the run runID creates, when the first batch goes.
func submitItems(ctx context.Context, c *clientsdk.Client, in io.Reader, runID func() (string, error), defaults *oncejobv1.SubmitJobRequest, idField string, batchSize int, sum *runSubmitSummary) error {
	lineCh, readErr, stopReading := readLines(in)
	defer stopReading()
	var (
		batch []clientsdk.SubmitItem
		lines []int
	)
	n := 0
	for {
		var text string
		var more bool
		select {
		case text, more = <-lineCh:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if !more {
			break
		}
		n++
		line := strings.TrimSpace(text)
		if line == "" {
			continue
		}
		sum.mu.Lock()
		sum.Lines = n
		sum.mu.Unlock()
		item, err := parseItem([]byte(line), defaults, idField)
		if err != nil {
			sum.mu.Lock()
			sum.Invalid++
			sum.report(n, err)
			sum.mu.Unlock()
			continue
		}
		batch, lines = append(batch, item), append(lines, n)
		if len(batch) == batchSize {
			if err := sendBatch(ctx, c, runID, batch, lines, sum); err != nil {
				return err
			}
			batch, lines = batch[:0], lines[:0]
		}
	}
	if err := readErr(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return sendBatch(ctx, c, runID, batch, lines, sum)
}

// readLines reads in line by line beside the submissions, so a signal
// stops a run that waits for its input (a pipe, a slow producer) at once.
// The channel closes at the end of in; err then says why it ended (nil:
// the end of the file). stop ends the reading early.
func readLines(in io.Reader) (lineCh <-chan string, err func() error, stop func()) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxItemLine)
	ch := make(chan string)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	return ch, sc.Err, func() { close(done) }
}

// sendBatch submits a batch of items into the run and counts the answers;
// lines are the items' line numbers, for their errors.
func sendBatch(ctx context.Context, c *clientsdk.Client, runID func() (string, error), batch []clientsdk.SubmitItem, lines []int, sum *runSubmitSummary) error {
	if len(batch) == 0 {
		return nil
	}
	id, err := runID()
	if err != nil {
		return err
	}
	sum.mu.Lock()
	sum.Sent += len(batch)
	sum.mu.Unlock()
	results, err := c.SubmitMany(ctx, batch, clientsdk.IntoRun(id))
	if err != nil {
		return err
	}
	sum.mu.Lock()
	defer sum.mu.Unlock()
	for i, r := range results {
		switch {
		case r.Err != nil:
			sum.Refused++
			sum.report(lines[i], r.Err)
		case r.AlreadyInRun:
			sum.AlreadyInRun++
		case r.Outcome == oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED:
			sum.Created++
		default:
			sum.Reused++
			if r.Outcome == oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_DEDUPLICATED {
				sum.Deduplicated++
			}
		}
		if r.Err == nil && terminal(r.Job.GetStatus()) {
			sum.AlreadyDone++
		}
	}
	return nil
}

// report records and prints a line's error at once (stderr), so a long
// run tells its bad lines as it meets them. Called with sum.mu held.
func (sum *runSubmitSummary) report(line int, err error) {
	msg := fmt.Sprintf("line %d: %v", line, err)
	sum.Errors = append(sum.Errors, msg)
	fmt.Fprintln(os.Stderr, msg)
}

// itemLine is one line of an items file.
type itemLine struct {
	Text         *string           `json:"text"`
	Path         string            `json:"path"`
	MediaType    string            `json:"media_type"`
	Name         string            `json:"name"`
	ModelProfile string            `json:"model_profile"`
	Params       map[string]any    `json:"params"`
	Labels       map[string]string `json:"labels"`
}

// parseItem makes the item of one line: its request, on the run's
// defaults, and its key.
func parseItem(line []byte, defaults *oncejobv1.SubmitJobRequest, idField string) (clientsdk.SubmitItem, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return clientsdk.SubmitItem{}, lineError(line, err)
	}
	var it itemLine
	if err := json.Unmarshal(line, &it); err != nil {
		return clientsdk.SubmitItem{}, lineError(line, err)
	}
	doc := &oncejobv1.Document{MediaType: it.MediaType, Name: it.Name}
	switch {
	case it.Text != nil && it.Path != "":
		return clientsdk.SubmitItem{}, errors.New(`has both "text" and "path"`)
	case it.Text != nil:
		doc.Content = &oncejobv1.Document_Text{Text: *it.Text}
	case it.Path != "":
		data, err := os.ReadFile(it.Path)
		if err != nil {
			return clientsdk.SubmitItem{}, err
		}
		doc.Content = &oncejobv1.Document_Data{Data: data}
		if doc.MediaType == "" {
			doc.MediaType = mediaTypeOf(it.Path)
		}
	default:
		return clientsdk.SubmitItem{}, errors.New(`has no document: give "text" or "path"`)
	}
	if doc.MediaType == "" {
		doc.MediaType = "text/plain"
	}
	req := &oncejobv1.SubmitJobRequest{Pipeline: defaults.GetPipeline(), Document: doc, ModelProfile: defaults.GetModelProfile(), Labels: map[string]string{}}
	if it.ModelProfile != "" {
		req.ModelProfile = it.ModelProfile
	}
	params := defaults.GetParams().AsMap()
	for k, v := range it.Params {
		params[k] = v
	}
	var err error
	if req.Params, err = structpb.NewStruct(params); err != nil {
		return clientsdk.SubmitItem{}, fmt.Errorf("params: %w", err)
	}
	for k, v := range defaults.GetLabels() {
		req.Labels[k] = v
	}
	for k, v := range it.Labels {
		req.Labels[k] = v
	}
	item := clientsdk.SubmitItem{Request: req}
	if idField != "" {
		if item.Key, err = itemKey(raw, idField, req); err != nil {
			return clientsdk.SubmitItem{}, err
		}
	}
	return item, nil
}

// lineError says what is wrong with a line in the words of the items
// file's format, not encoding/json's ("cannot unmarshal array into Go
// value of type map[string]json.RawMessage": issue 30).
func lineError(line []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax) && syntax.Offset < int64(len(line)):
		return fmt.Errorf("not a JSON object: %s at column %d", syntax.Error(), max(syntax.Offset, 1))
	case errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("not a JSON object: the line ends before the object does (a brace or quote not closed?)")
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("not a JSON object: the line is %s; each line must be one object, such as {\"text\": \"...\"}", jsonKind(typ.Value))
	case errors.As(err, &typ):
		return fmt.Errorf("field %q must be %s; found %s", typ.Field, expected(typ.Field), jsonKind(typ.Value))
	}
	return fmt.Errorf("not an item: %w", err)
}

// jsonKind names a JSON value's kind as encoding/json's UnmarshalTypeError
// reports it ("array", "number", "string", "bool", "object").
func jsonKind(v string) string {
	switch v {
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	}
	if strings.HasPrefix(v, "number") {
		return "a number"
	}
	return "a " + v
}

// expected is what an item's field holds.
func expected(field string) string {
	switch {
	case field == "params":
		return "an object"
	case field == "labels" || strings.HasPrefix(field, "labels."):
		return "an object of strings"
	}
	return "a string"
}

// itemKey is the key of an item named by its id field: WorkID over the
// pipeline, model profile, params and the id (a URL normalised), so the
// same id through the same computation is one intent whatever else the
// line carries.
func itemKey(raw map[string]json.RawMessage, field string, req *oncejobv1.SubmitJobRequest) (string, error) {
	v, ok := raw[field]
	if !ok {
		return "", fmt.Errorf("has no field %q (--id-field)", field)
	}
	var id any
	if err := json.Unmarshal(v, &id); err != nil {
		return "", err
	}
	if s, ok := id.(string); ok && (strings.HasPrefix(strings.ToLower(s), "http://") || strings.HasPrefix(strings.ToLower(s), "https://")) {
		u, err := clientsdk.NormalizeURL(s)
		if err != nil {
			return "", fmt.Errorf("field %q: %w", field, err)
		}
		id = u
	}
	return clientsdk.WorkID("oncejob.run.item", 1, map[string]any{
		"pipeline": req.GetPipeline(), "model_profile": req.GetModelProfile(), "params": req.GetParams().AsMap(), "id": id,
	})
}

func terminal(s oncejobv1.JobStatus) bool {
	switch s {
	case oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, oncejobv1.JobStatus_JOB_STATUS_FAILED,
		oncejobv1.JobStatus_JOB_STATUS_CANCELLED, oncejobv1.JobStatus_JOB_STATUS_DEAD_LETTERED:
		return true
	}
	return false
}

// runProgress shows a run's progress: one live line on a terminal, a plain
// line every few seconds otherwise, nothing but the summary with --json.
type runProgress struct {
	w     io.Writer
	json  bool
	live  bool
	mu    sync.Mutex
	last  time.Time
	start time.Time
}

func newRunProgress(w io.Writer, asJSON bool) *runProgress {
	return &runProgress{w: w, json: asJSON, live: !asJSON && isTerminal(w), start: time.Now()}
}

func (p *runProgress) header(run *oncejobv1.Run) {
	if !p.json {
		cmdline.Say(p.w, "run %s (%s)\n", run.GetId(), run.GetName())
		if run.GetProviderBatch() {
			cmdline.Say(p.w, "provider batch: the items' calls wait for the provider's batches (window %s)\n", llm.BatchWindow)
		}
	}
}

// poll shows the run's progress every second until the returned stop.
func (p *runProgress) poll(ctx context.Context, c *clientsdk.Client, runID string, sum *runSubmitSummary) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if r, err := c.GetRun(ctx, runID); err == nil {
				p.update(r, sum)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// update shows a snapshot: at once on a terminal, every 2s otherwise.
func (p *runProgress) update(r *oncejobv1.Run, sum *runSubmitSummary) {
	if p.json {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live && time.Since(p.last) < 2*time.Second {
		return
	}
	p.last = time.Now()
	sum.mu.Lock()
	submitted := sum.Created + sum.AlreadyInRun + sum.Reused
	sum.mu.Unlock()
	line := progressLine(r.GetProgress(), submitted)
	if p.live {
		cmdline.Say(p.w, "\r\033[K%s", line)
		return
	}
	cmdline.Say(p.w, "%s\n", line)
}

func progressLine(pr *oncejobv1.RunProgress, submitted int) string {
	items := pr.GetItems()
	done := pr.GetSucceeded()
	finished := done + pr.GetFailed() + pr.GetDeadLettered() + pr.GetCancelled()
	bar := ""
	if items > 0 {
		const width = 24
		n := int(finished * width / items)
		bar = "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "] "
	}
	left := "-"
	if d := pr.GetEstimatedTimeLeft(); d != nil {
		left = d.AsDuration().Round(time.Second).String()
	}
	return fmt.Sprintf("%ssubmitted %d, done %d/%d, failed %d, reused %d, %.0f/s, left %s",
		bar, submitted, done, items, pr.GetFailed()+pr.GetDeadLettered(), pr.GetReused(), pr.GetItemsPerSecond(), left)
}

// done prints the summary.
func (p *runProgress) done(run *oncejobv1.Run, sum *runSubmitSummary) {
	pr := run.GetProgress()
	if p.json {
		if run != nil {
			sum.Final = protoJSON(pr)
			sum.State = strings.TrimPrefix(run.GetState().String(), "RUN_STATE_")
		}
		b, _ := json.Marshal(sum)
		cmdline.Say(p.w, "%s\n", b)
		return
	}
	if p.live {
		cmdline.Say(p.w, "\r\033[K")
	}
	if run == nil {
		cmdline.Say(p.w, "no run: %d lines, %d invalid\n", sum.Lines, sum.Invalid)
		return
	}
	cmdline.Say(p.w, "%s\n", progressLine(pr, sum.Created+sum.AlreadyInRun+sum.Reused))
	cmdline.Say(p.w, "run %s: %d lines; %d new items, %d already in the run (submitted before), %d already done, %d reused; %d invalid lines, %d refused\n",
		run.GetId(), sum.Lines, sum.Created, sum.AlreadyInRun, sum.AlreadyDone, sum.Reused, sum.Invalid, sum.Refused)
	cmdline.Say(p.w, "items %d: succeeded %d, failed %d, dead-lettered %d, cancelled %d, pending %d; computed %d, reused %d\n",
		pr.GetItems(), pr.GetSucceeded(), pr.GetFailed(), pr.GetDeadLettered(), pr.GetCancelled(),
		pr.GetItems()-pr.GetSucceeded()-pr.GetFailed()-pr.GetDeadLettered()-pr.GetCancelled(), pr.GetComputed(), pr.GetReused())
}
