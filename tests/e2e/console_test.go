package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/web/chromium"
)

// The console's browser tests: the real binary (embedded store, workers,
// a simulator of its own for faults), driven in Debian's headless
// Chromium through chromedp. Each saves a screenshot in its artifact
// directory (go test -artifacts keeps them; make test does).

const consolePipelines = `
pipelines:
  - name: fragile
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
    retry: {max_attempts: 1}
  - name: reviewed
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary]}
    require_approval: true
  - name: uncertain
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
    on_unknown: reconcile
`

type consoleEnv struct {
	t       *testing.T
	base    string // http://host:port of the HTTP face
	sim     *simProc
	apiKey  string
	ctx     context.Context // the browser tab
	dialogs atomic.Int64    // JavaScript dialogs the page opened (alert, confirm)
}

// browserPath is the system Chromium, or a skip (a failure under CI=true)
// that says how to install it.
func browserPath(t *testing.T) string {
	t.Helper()
	path, err := chromium.Path()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests need Chromium under CI=true: %v", err)
		}
		t.Skipf("SKIP: %v", err)
	}
	return path
}

// startConsole runs `oncejob serve` with its console and opens a browser.
// apiKey, when set, is the one key of the server (tenant acme); else the
// server is in dev mode. args are more serve flags (the last of a flag
// given twice wins).
func startConsole(t *testing.T, apiKey string, args ...string) *consoleEnv {
	t.Helper()
	return startConsoleOn(t, startSim(t), apiKey, args...)
}

// startConsoleOn is startConsole with the simulator process given.
func startConsoleOn(t *testing.T, sim *simProc, apiKey string, args ...string) *consoleEnv {
	t.Helper()
	path := browserPath(t)
	e := &consoleEnv{t: t, sim: sim, apiKey: apiKey}
	httpAddr := freeAddr(t)
	grpcAddr := freeAddr(t)
	extra := append([]string{"--http-addr", httpAddr, "--lease-duration", "30s"}, args...)
	if apiKey != "" {
		extra = append(extra, "--api-keys", writeFile(t, "keys.yaml", fmt.Sprintf("keys:\n  - tenant: acme\n    sha256: %s\n", tenant.HashKey(apiKey))))
	}
	p := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), grpcAddr, e.sim, writeFile(t, "pipelines.yaml", consolePipelines), extra...)...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, grpcAddr)
	e.base = "http://" + httpAddr
	require.Contains(t, p.logs.String(), "console:  "+e.base+"/", "the banner names the console")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	ctx, closeBrowser := chromium.New(ctx, path, t.TempDir())
	t.Cleanup(closeBrowser)
	require.NoError(t, chromedp.Do(ctx)) // start the browser and its tab
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			e.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	e.ctx = ctx
	return e
}

// api calls the HTTP API as the test's client (not the browser).
func (e *consoleEnv) api(method, path string, body any) map[string]any {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(e.t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, r)
	require.NoError(e.t, err)
	req.Header.Set("Idempotency-Key", uuid.NewString())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	require.Equal(e.t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, path, data)
	var m map[string]any
	require.NoError(e.t, json.Unmarshal(data, &m))
	return m
}

func (e *consoleEnv) submit(pipeline, name, text string) string {
	e.t.Helper()
	r := e.api("POST", "/v1/jobs", map[string]any{"pipeline": pipeline, "document": map[string]any{"text": text, "name": name}})
	return r["job"].(map[string]any)["id"].(string)
}

// waitStatus waits until the API reports the job in status.
func (e *consoleEnv) waitStatus(id, status string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		return e.api("GET", "/v1/jobs/"+id, nil)["job"].(map[string]any)["status"] == "JOB_STATUS_"+status
	}, 30*time.Second, 50*time.Millisecond, "job %s never became %s", id, status)
}

func (e *consoleEnv) do(actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	require.NoError(e.t, chromedp.Do(e.ctx, actions...))
}

// keptAcrossRefreshes marks the node sel selects, waits until the page has
// fetched a path ending in path twice more (its timed refresh: the second fetch starts after
// the first one's view was drawn) and fails if sel then selects another
// node: a refresh that swaps an unchanged link or button loses a click that
// falls between its press and release.
func (e *consoleEnv) keptAcrossRefreshes(sel, path string) {
	e.t.Helper()
	evaluate[bool](e, `(() => {
		window.__loads = 0;
		window.__fetch = window.__fetch || window.fetch;
		window.fetch = (...a) => {
			if (String(a[0]).endsWith(`+strconv.Quote(path)+`)) window.__loads++;
			return window.__fetch(...a);
		};
		document.querySelector(`+strconv.Quote(sel)+`).__kept = true;
		return true;
	})()`)
	e.do(chromedp.Poll[chromedp.Void](`window.__loads >= 2`))
	require.True(e.t, evaluate[bool](e, `document.querySelector(`+strconv.Quote(sel)+`).__kept === true`),
		"a refresh replaced %s, which had not changed", sel)
}

func evaluate[T any](e *consoleEnv, js string) T {
	e.t.Helper()
	v, err := chromedp.Run(e.ctx, chromedp.Evaluate[T](js))
	require.NoError(e.t, err, "evaluate %s", js)
	return v
}

// screenshot saves the page in the test's artifact directory.
func (e *consoleEnv) screenshot(name string) {
	e.t.Helper()
	buf, err := chromedp.Run(e.ctx, chromedp.FullScreenshot(100))
	require.NoError(e.t, err)
	path := filepath.Join(e.t.ArtifactDir(), name+".png")
	require.NoError(e.t, os.WriteFile(path, buf, 0o644))
	e.t.Logf("screenshot: %s", path)
}

func css(selector string) chromedp.CSS { return chromedp.CSS(selector) }

// A job submitted after the jobs page loaded appears within a second, with
// no reload, and its row follows it to SUCCEEDED. Not t.Parallel, unlike
// the rest of the package: it measures a delay on the wall clock, so it
// runs in the sequential phase, before the parallel tests load the machine.
func TestConsoleJobsPageIsLive(t *testing.T) {
	e := startConsole(t, "")
	before := e.submit("summarize", "before.txt", "A job that exists when the page loads.")
	e.waitStatus(before, "SUCCEEDED")

	e.do(chromedp.Navigate(e.base+"/#/jobs"), chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="`+before+`"]`)))
	// Mark this page load, and note when each row first appears.
	evaluate[chromedp.Void](e, `
		window.oncejobTestLoad = 'first';
		window.oncejobTestSeen = {};
		new MutationObserver(() => {
			for (const tr of document.querySelectorAll('#jobs-body tr')) {
				if (!(tr.dataset.jobId in window.oncejobTestSeen)) window.oncejobTestSeen[tr.dataset.jobId] = Date.now();
			}
		}).observe(document.getElementById('jobs-body'), {childList: true});`)

	id := e.submit("summarize", "after.txt", "A job submitted after the page loaded.")
	committed := time.Now()
	e.do(chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="` + id + `"]`)))
	seen := evaluate[int64](e, `window.oncejobTestSeen[`+jsString(id)+`]`)
	delay := time.UnixMilli(seen).Sub(committed)
	t.Logf("the new job's row appeared %s after its submission returned", delay)
	first := evaluate[string](e, `document.querySelector('#jobs-body tr').dataset.jobId`)
	require.Equal(t, id, first, "the newest job is on top")

	e.do(chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="` + id + `"][data-status="SUCCEEDED"]`)))
	require.Equal(t, "first", evaluate[string](e, `window.oncejobTestLoad`), "no reload happened")
	require.Equal(t, "live", evaluate[string](e, `document.getElementById('live').textContent`))
	// Counts follow within a second (they are re-read at most once a second).
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#counts a[data-status="SUCCEEDED"]')?.textContent === 'SUCCEEDED 2'`))
	e.screenshot("jobs-live")
}

// The count chips follow the stream the rows follow: a job submitted
// after the page loaded is counted QUEUED, then SUCCEEDED with QUEUED back
// to 0, with no reload; and a page loaded while a job runs does not keep
// the status the job had when the counts were read.
func TestConsoleCountsFollowTheRows(t *testing.T) {
	t.Parallel()
	e := startConsole(t, "")
	e.do(chromedp.Navigate(e.base+"/#/jobs"), chromedp.WaitVisible(css(`#counts a[data-status="ALL"]`)))
	evaluate[chromedp.Void](e, `window.oncejobTestLoad = 'first'`)
	chip := func(status string) string {
		return evaluate[string](e, `document.querySelector('#counts a[data-status="`+status+`"]')?.textContent ?? ''`)
	}
	require.Equal(t, "QUEUED 0", chip("QUEUED"), "every status has its chip, also at 0")

	id := e.submit("summarize", "counted.txt", "A job whose count follows its row.")
	e.waitStatus(id, "SUCCEEDED")
	e.do(chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="` + id + `"][data-status="SUCCEEDED"]`)))
	// The chips settle on the rows' state: the moves the stream made, and
	// the read after the last change (at most a second later).
	e.do(chromedp.Poll[chromedp.Void](chipsRead(map[string]string{"SUCCEEDED": "SUCCEEDED 1", "QUEUED": "QUEUED 0", "RUNNING": "RUNNING 0", "ALL": "all 1"})))
	require.Equal(t, "first", evaluate[string](e, `window.oncejobTestLoad`), "no reload happened")
	e.screenshot("counts-follow")

	// The chips agree with the rows once the rows have settled, on a page
	// loaded while jobs run: every row's status is counted.
	for i := range 5 {
		e.submit("summarize", fmt.Sprintf("busy-%d.txt", i), fmt.Sprintf("Job %d submitted as the page loads.", i))
	}
	e.do(chromedp.Navigate(e.base+"/#/jobs"), chromedp.WaitVisible(css(`#counts a[data-status="ALL"]`)))
	e.do(chromedp.Poll[chromedp.Void](`document.querySelectorAll('#jobs-body tr[data-status="SUCCEEDED"]').length === 6`))
	e.do(chromedp.Poll[chromedp.Void](chipsRead(map[string]string{"SUCCEEDED": "SUCCEEDED 6", "QUEUED": "QUEUED 0", "RUNNING": "RUNNING 0", "ALL": "all 6"})))
}

// chipsRead is a script true when every chip named reads as given.
func chipsRead(want map[string]string) string {
	var conds []string
	for status, text := range want {
		conds = append(conds, `document.querySelector('#counts a[data-status="`+status+`"]')?.textContent === `+jsString(text))
	}
	slices.Sort(conds)
	return strings.Join(conds, " && ")
}

// A dead-lettered job is replayed with one click and reaches SUCCEEDED on
// the dead letters page.
func TestConsoleReplaysADeadLetter(t *testing.T) {
	t.Parallel()
	e := startConsole(t, "")
	e.sim.setFaults(t, `{"unavailable": {}}`) // every call 503: the one attempt fails
	id := e.submit("fragile", "fragile.txt", "A job whose provider is down.")
	e.waitStatus(id, "DEAD_LETTERED")
	e.sim.setFaults(t, `{}`) // the provider is back

	card := `#queue article[data-job-id="` + id + `"]`
	e.do(chromedp.Navigate(e.base+"/#/dead-letters"), chromedp.WaitVisible(css(card+` .status.st-DEAD_LETTERED`)))
	require.Contains(t, evaluate[string](e, `document.querySelector('`+card+` .last-error').textContent`), "BUDGET_SPENT")
	e.screenshot("dead-letter-before")
	e.do(chromedp.Click(css(card + ` button[data-action="replay"]`)))
	e.do(chromedp.WaitVisible(css(card + ` .status.st-SUCCEEDED`)))
	e.waitStatus(id, "SUCCEEDED")
	require.Contains(t, evaluate[string](e, `document.querySelector('`+card+` .action-result').textContent`), "Replay: done")
	e.screenshot("dead-letter-replayed")

	replays := 0
	for _, ev := range e.api("GET", "/v1/jobs/"+id+"?view=JOB_VIEW_FULL", nil)["job"].(map[string]any)["llm_attempts"].([]any) {
		if ev.(map[string]any)["outcome"] == "LLM_OUTCOME_SUCCEEDED" {
			replays++
		}
	}
	require.Equal(t, 1, replays, "one click, one replay, one successful call")
}

// The jobs list names each job by its document: its name, or for an
// unnamed one its kind and size - before issue 30 an unnamed job showed
// its id alone.
func TestConsoleNamesJobsByTheirDocument(t *testing.T) {
	t.Parallel()
	e := startConsole(t, "")
	named := e.submit("summarize", "invoice-42.txt", "Invoice 42.")
	unnamed := e.submit("summarize", "", "Invoice 43, pasted.")
	e.do(chromedp.Navigate(e.base+"/#/jobs"), chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="`+unnamed+`"]`)),
		chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="`+named+`"]`)))
	link := func(id string) string {
		return evaluate[string](e, `document.querySelector('#jobs-body tr[data-job-id="`+id+`"] a.job-link').textContent`)
	}
	require.Equal(t, "invoice-42.txt", link(named))
	require.Equal(t, "(unnamed text/plain, 19 bytes) "+unnamed[:8], link(unnamed))
}

// An approval shows the planned output beside the job and is approved with
// one click.
func TestConsoleApprovesAJob(t *testing.T) {
	t.Parallel()
	e := startConsole(t, "")
	id := e.submit("reviewed", "contract.txt", "A contract that needs a human look before it is published.")
	e.waitStatus(id, "AWAITING_APPROVAL")

	card := `#queue article[data-job-id="` + id + `"]`
	e.do(chromedp.Navigate(e.base+"/#/approvals"), chromedp.WaitVisible(css(card+` .status.st-AWAITING_APPROVAL`)))
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('` + card + ` pre.plan').textContent.includes('"summary"')`))
	e.screenshot("approval-before")
	e.do(chromedp.SendKeys(css(card+` input.reason`), "looks right"), chromedp.Click(css(card+` button[data-action="approve"]`)))
	e.do(chromedp.WaitVisible(css(card + ` .status.st-SUCCEEDED`)))
	e.waitStatus(id, "SUCCEEDED")
	e.screenshot("approval-approved")

	job := e.api("GET", "/v1/jobs/"+id, nil)["job"].(map[string]any)
	require.Contains(t, job["output"], "summary", "the approved plan is published")
}

// Markup in a job's name, text and output is shown as text: no element is
// made of it and no script runs.
func TestConsoleRendersMarkupAsText(t *testing.T) {
	t.Parallel()
	e := startConsole(t, "")
	const name = `<img src=x onerror=alert(1)>`
	id := e.submit("summarize", name, `<script>alert(2)</script><b>bold</b>`)
	e.waitStatus(id, "SUCCEEDED")

	e.do(chromedp.Navigate(e.base+"/#/jobs"), chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="`+id+`"]`)))
	require.Equal(t, name, evaluate[string](e, `document.querySelector('#jobs-body tr[data-job-id="`+id+`"] a.job-link').textContent`))
	require.Zero(t, evaluate[int](e, `document.querySelectorAll('img, #jobs-body b').length`), "no element from the job's data")
	e.screenshot("markup-jobs")

	e.do(chromedp.Navigate(e.base+"/#/jobs/"+id), chromedp.WaitVisible(css(`#job-output`)))
	require.Contains(t, evaluate[string](e, `document.querySelector('#job-summary h1').textContent`), name)
	require.Contains(t, evaluate[string](e, `document.getElementById('job-output').textContent`), `<script>alert(2)</script>`)
	require.Zero(t, evaluate[int](e, `document.querySelectorAll('img, #main b').length`))
	require.Equal(t, 1, evaluate[int](e, `document.scripts.length`), "only the console's own module")
	e.screenshot("markup-job")
	require.Zero(t, e.dialogs.Load(), "no alert ran")
}

// Outside dev mode the console asks for the API key once per tab and keeps
// it in sessionStorage: never in a cookie or the URL.
func TestConsoleAsksForTheAPIKey(t *testing.T) {
	t.Parallel()
	const key = "acme-console-key"
	e := startConsole(t, key)
	id := e.submit("summarize", "keyed.txt", "A job of tenant acme.")

	e.do(chromedp.Navigate(e.base+"/#/jobs"), chromedp.WaitVisible(css(`#auth-key`)))
	e.screenshot("api-key-prompt")
	e.do(chromedp.SendKeys(css(`#auth-key`), key), chromedp.Click(css(`#auth-form button[type="submit"]`)))
	e.do(chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="` + id + `"]`)))
	require.Equal(t, key, evaluate[string](e, `sessionStorage.getItem('oncejob.apiKey')`))
	require.Empty(t, evaluate[string](e, `document.cookie`))
	require.NotContains(t, evaluate[string](e, `location.href`), key)

	live := e.submit("summarize", "keyed-live.txt", "Another job of tenant acme.")
	e.do(chromedp.WaitVisible(css(`#jobs-body tr[data-job-id="` + live + `"]`)))
	e.screenshot("api-key-jobs")
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return strings.ReplaceAll(string(b), "'", `\'`)
}

// An unknown outcome is resolved as a retry with one click: the retry
// reuses the provider key, so the call the provider finished is not billed
// twice, and the job succeeds.
func TestConsoleResolvesAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	// A client timeout shorter than the answer, and no lookup: the job
	// waits in OUTCOME_UNKNOWN for an operator.
	e := startConsole(t, "", "--llm-timeout", "300ms", "--llm-lookup-path", "")
	e.sim.setFaults(t, `{"bill_then_timeout": {"count": 1, "delay": "2s"}}`)
	id := e.submit("uncertain", "uncertain.txt", "A batch document whose answer got lost.")
	e.waitStatus(id, "OUTCOME_UNKNOWN")

	card := `#queue article[data-job-id="` + id + `"]`
	e.do(chromedp.Navigate(e.base+"/#/unknown"), chromedp.WaitVisible(css(card+` .status.st-OUTCOME_UNKNOWN`)))
	e.screenshot("unknown-before")
	e.do(chromedp.Click(css(card + ` button[data-action="resolve-retry"]`)))
	e.do(chromedp.WaitVisible(css(card + ` .status.st-SUCCEEDED`)))
	e.waitStatus(id, "SUCCEEDED")
	e.screenshot("unknown-resolved")
	require.EqualValues(t, 1, e.sim.stats(t).BilledCalls, "the finished call is billed once")
}

// A delivery the receiver refused is shown dead-lettered on the job's page
// and, once the receiver is back, retried with one click and delivered.
func TestConsoleRetriesADeliveryByAClick(t *testing.T) {
	t.Parallel()
	var accept atomic.Bool
	var received atomic.Int64
	recv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !accept.Load() {
			http.Error(w, "not today", http.StatusBadRequest) // refused for good: dead-lettered at once
			return
		}
		received.Add(1)
		w.Header().Set("Webhook-Receipt", "receipt-1")
	})}
	recvAddr := freeAddr(t)
	lis, err := net.Listen("tcp", recvAddr)
	require.NoError(t, err)
	go func() { _ = recv.Serve(lis) }()
	t.Cleanup(func() { _ = recv.Close() })

	secret := writeFile(t, "secret", "whsec_"+base64.StdEncoding.EncodeToString([]byte("a console test secret, 24b")))
	config := writeFile(t, "oncejob.yaml", fmt.Sprintf(`
sinks:
  - name: billing
    tenant: default
    events: [job.succeeded]
    webhook:
      url: http://%s/hook
      secret: {file: %s}
      allow_private_network: true
`, recvAddr, secret))
	e := startConsole(t, "", "--config", config, "--relay-poll-interval", "50ms")
	id := e.submit("summarize", "delivered.txt", "A job whose result goes to billing.")
	e.waitStatus(id, "SUCCEEDED")

	row := `#deliveries-table tbody tr`
	e.do(chromedp.Navigate(e.base+"/#/jobs/"+id), chromedp.WaitVisible(css(row+` .status.dl-DEAD_LETTERED`)))
	require.Contains(t, evaluate[string](e, `document.querySelector('`+row+`').textContent`), "job:"+id+":job.succeeded:0")
	e.screenshot("delivery-dead-lettered")

	accept.Store(true)
	e.do(chromedp.Click(css(row + ` button[data-action="retry-delivery"]`)))
	e.do(chromedp.WaitVisible(css(row + ` .status.dl-DELIVERED`)))
	require.Contains(t, evaluate[string](e, `document.querySelector('`+row+`').textContent`), "receipt-1")
	e.screenshot("delivery-retried")
	require.EqualValues(t, 1, received.Load(), "delivered once")
}

// The runs page lists a run with its progress; the run's page lists its
// dead-lettered items, replays one with its button, and the others with
// Retry failures, until the run is complete.
func TestConsoleRunsPageReplaysAndRetriesFailures(t *testing.T) {
	t.Parallel()
	e := startConsole(t, "")
	e.sim.setFaults(t, `{"unavailable": {}}`) // every call 503: each item's one attempt fails
	run := e.api("POST", "/v1/runs", map[string]any{"name": "console run", "pipeline": "fragile"})["run"].(map[string]any)["id"].(string)
	var items []any
	for i := range 3 {
		items = append(items, map[string]any{"idempotency_key": fmt.Sprintf("console-run-%d", i), "request": map[string]any{"document": map[string]any{"text": fmt.Sprintf("item %d", i), "name": fmt.Sprintf("item-%d.txt", i)}}})
	}
	results := e.api("POST", "/v1/jobs:batchSubmit", map[string]any{"run_id": run, "items": items})["results"].([]any)
	var ids []string
	for _, r := range results {
		id := r.(map[string]any)["job"].(map[string]any)["id"].(string)
		ids = append(ids, id)
		e.waitStatus(id, "DEAD_LETTERED")
	}
	e.sim.setFaults(t, `{}`) // the provider is back

	row := `#runs-body tr[data-run-id="` + run + `"]`
	e.do(chromedp.Navigate(e.base+"/#/runs"), chromedp.WaitVisible(css(row)))
	require.Equal(t, "3", evaluate[string](e, `document.querySelector('`+row+` [data-field="items"]').textContent`))
	require.Equal(t, "3", evaluate[string](e, `document.querySelector('`+row+` [data-field="failed"]').textContent`))
	e.screenshot("runs")
	e.keptAcrossRefreshes(row+` a.run-link`, "/v1/runs?page_size=100")

	e.do(chromedp.Click(css(row+` a.run-link`)), chromedp.WaitVisible(css(`#failed-body tr[data-job-id="`+ids[0]+`"]`)))
	e.keptAcrossRefreshes(`#failed-body tr[data-job-id="`+ids[0]+`"] button[data-action="replay"]`, "/v1/runs/"+run)
	e.do(chromedp.Click(css(`#failed-body tr[data-job-id="` + ids[0] + `"] button[data-action="replay"]`)))
	e.waitStatus(ids[0], "SUCCEEDED")
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#failed-body tr[data-job-id="` + ids[0] + `"] .status.st-SUCCEEDED') !== null`))
	e.do(chromedp.Click(css(`#retry-failures`)))
	e.do(chromedp.Poll[chromedp.Void](`document.getElementById('retry-result').textContent === 'replayed 2 jobs'`))
	e.waitStatus(ids[1], "SUCCEEDED")
	e.waitStatus(ids[2], "SUCCEEDED")
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#run-facts [data-field="succeeded"]').textContent === '3'`))
	e.screenshot("run-retried")
	require.Zero(t, e.dialogs.Load())
}

// TestConsoleShowsARunsProviderBatches: a run submitted with provider_batch
// shows, on its page, the batch its calls went into as the provider moves
// it (in progress, then completed), with the run's lines, those answered,
// the price class and the cost.
func TestConsoleShowsARunsProviderBatches(t *testing.T) {
	t.Parallel()
	sim, _ := batchSim(t, 5*time.Second)
	e := startConsoleOn(t, sim, "", "--llm-batch-api")
	run := e.api("POST", "/v1/runs", map[string]any{"name": "nightly batch", "pipeline": "fragile", "provider_batch": true})["run"].(map[string]any)
	require.Equal(t, true, run["provider_batch"])
	id := run["id"].(string)
	var items []any
	for i := range 3 {
		items = append(items, map[string]any{"idempotency_key": fmt.Sprintf("console-batch-%d", i), "request": map[string]any{"document": map[string]any{"text": fmt.Sprintf("batched item %d", i)}}})
	}
	e.api("POST", "/v1/jobs:batchSubmit", map[string]any{"run_id": id, "items": items})

	e.do(chromedp.Navigate(e.base+"/#/runs/"+id), chromedp.WaitVisible(css("#run-batches")))
	require.Equal(t, "yes", evaluate[string](e, `document.querySelector('#run-facts [data-field="provider-batch"]').textContent.slice(0, 3)`))
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#batches-body tr[data-status="in_progress"]') !== null`))
	require.Equal(t, "in progress", evaluate[string](e, `document.querySelector('#batches-body tr [data-field="batch-status"]').textContent`))
	require.Equal(t, "3", evaluate[string](e, `document.querySelector('#batches-body tr [data-field="lines"]').textContent`))
	require.Equal(t, "0", evaluate[string](e, `document.querySelector('#batches-body tr [data-field="answered"]').textContent`))
	e.screenshot("run-batch-in-progress")

	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#batches-body tr[data-status="completed"] [data-field="answered"]')?.textContent === '3'`))
	require.Equal(t, 1, evaluate[int](e, `document.querySelectorAll('#batches-body tr').length`), "one batch for the three calls")
	require.Equal(t, "batch", evaluate[string](e, `document.querySelector('#batches-body tr [data-field="price-class"]').textContent`))
	require.NotEqual(t, "0.000000", evaluate[string](e, `document.querySelector('#batches-body tr [data-field="cost"]').textContent`))
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#run-facts [data-field="succeeded"]').textContent === '3'`))
	e.screenshot("run-batch-completed")
	st := sim.stats(t)
	require.EqualValues(t, 3, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls)
	require.Zero(t, e.dialogs.Load())
}

// TestConsoleShowsTheProviderLimit: against a provider that takes one
// call a second, a run's page shows the limit its calls draw from, its
// use and the run's time left at its pace; a job the limit sent back to
// the queue shows when it is tried next and why, on its page and in its
// timeline.
func TestConsoleShowsTheProviderLimit(t *testing.T) {
	t.Parallel()
	sim := startLimitedSim(t, "--limit-requests", "1", "--limit-window", "1s")
	limited := writeFile(t, "limited.yaml", strings.Replace(consolePipelines, "pipelines:", "model_profiles:\n  default:\n    model: oncejob-sim-1\n    limits: {requests_per_minute: 60}\npipelines:", 1))
	e := startConsoleOn(t, sim, "", "--pipelines", limited)
	run := e.api("POST", "/v1/runs", map[string]any{"name": "paced run", "pipeline": "fragile"})["run"].(map[string]any)["id"].(string)
	var items []any
	for i := range 30 {
		items = append(items, map[string]any{"idempotency_key": fmt.Sprintf("paced-%d", i), "request": map[string]any{"document": map[string]any{"text": fmt.Sprintf("paced item %d", i)}}})
	}
	e.api("POST", "/v1/jobs:batchSubmit", map[string]any{"run_id": run, "items": items})

	e.do(chromedp.Navigate(e.base+"/#/runs/"+run), chromedp.WaitVisible(css(`#run-facts [data-field="limit"]`)))
	e.do(chromedp.Poll[chromedp.Void](`document.querySelector('#run-facts [data-field="limit"]').textContent.includes('s left at this pace')`))
	// The pace: the configured 60 a minute, or lower when the provider's
	// headers say so.
	require.Regexp(t, `^default: \d+(\.\d+)? requests/min · \d+ in flight, \d+ waiting, \d+ 429s, \d+s left at this pace`,
		evaluate[string](e, `document.querySelector('#run-facts [data-field="limit"]').textContent`))
	e.screenshot("run-limit")

	var waiting string
	require.Eventually(t, func() bool {
		jobs, _ := e.api("GET", "/v1/jobs?run_id="+run+"&status=JOB_STATUS_RETRY_WAIT&page_size=1", nil)["jobs"].([]any)
		if len(jobs) == 0 {
			return false
		}
		waiting = jobs[0].(map[string]any)["id"].(string)
		return true
	}, 30*time.Second, 50*time.Millisecond, "a run item waits in the queue for the limit")
	e.do(chromedp.Navigate(e.base+"/#/jobs/"+waiting), chromedp.WaitVisible(css(`#timeline li[data-status="RETRY_WAIT"] .next-try`)))
	require.Contains(t, evaluate[string](e, `document.getElementById('job-next-try')?.textContent || ''`), "waiting for the provider limit")
	// Its budget: a wait for the limit spends no attempt, so the page
	// reads 0 while it waits and 1 once it ran, however often it was
	// claimed.
	require.Regexp(t, `^[01]$`, evaluate[string](e, `document.getElementById('job-attempts-spent')?.textContent || ''`))
	e.screenshot("job-next-try")
	require.Zero(t, e.dialogs.Load())
}
