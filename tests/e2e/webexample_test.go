package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/web/chromium"
)

// buildWebExample bundles examples/web (the page and the TypeScript client,
// with esbuild from clientsdk/typescript's node_modules) into a directory
// of its own and returns it; without node or the package's node_modules it
// skips (fails under CI=true) with what to run.
func buildWebExample(t *testing.T) string {
	t.Helper()
	root := filepath.Join("..", "..")
	dir := t.TempDir()
	for _, f := range []string{"index.html", "style.css"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", "web", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	_, errNode := exec.LookPath("node")
	_, errModules := os.Stat(filepath.Join(root, "clientsdk", "typescript", "node_modules", "esbuild"))
	if errNode != nil || errModules != nil {
		msg := "the web example needs node and the TypeScript client's packages: apt-get install -y nodejs npm, then make ts"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	out, err := exec.Command("node", filepath.Join(root, "examples", "web", "build.mjs"), filepath.Join(dir, "dist")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return dir
}

// serveDir serves dir on a loopback port of its own (an origin of its
// own) and returns that origin.
func serveDir(t *testing.T, dir string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + lis.Addr().String()
}

// The example web page (examples/web), served from another origin than the
// API's and allowed by the config file's cors.allowed_origins, submits a
// document from real Chromium and shows the job's stages live, over the
// Connect protocol and over gRPC-web: the stages up to AWAITING_APPROVAL,
// then, after an approval made outside the page, the rest to SUCCEEDED,
// each seq once. A document's markup is shown as text and never runs. The
// same page from an origin not allowed gets an error and makes no job.
func TestWebExampleInChromium(t *testing.T) {
	t.Parallel()
	path := browserPath(t)
	site := buildWebExample(t)
	allowed, refused := serveDir(t, site), serveDir(t, site)

	const apiKey = "web-example-key"
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	keys := writeFile(t, "keys.yaml", fmt.Sprintf("keys:\n  - tenant: acme\n    sha256: %s\n", tenant.HashKey(apiKey)))
	config := writeFile(t, "oncejob.yaml", fmt.Sprintf("cors:\n  allowed_origins: [%s]\n", allowed))
	p := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), grpcAddr, nil, writeFile(t, "pipelines.yaml", consolePipelines),
		"--http-addr", httpAddr, "--api-keys", keys, "--config", config)...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, grpcAddr)
	jobs := dialJobs(t, grpcAddr)
	authed := func() context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+apiKey, "idempotency-key", uuid.NewString())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ctx, closeBrowser := chromium.New(ctx, path, t.TempDir())
	t.Cleanup(closeBrowser)
	require.NoError(t, chromedp.Do(ctx))
	e := &consoleEnv{t: t, ctx: ctx}
	page := func(origin, protocol string) string {
		q := url.Values{"api": {"http://" + httpAddr}, "key": {apiKey}, "protocol": {protocol}, "pipeline": {"reviewed"}}
		return origin + "/?" + q.Encode()
	}

	for _, protocol := range []string{"connect", "grpc-web"} {
		t.Run(protocol, func(t *testing.T) {
			e.t = t
			doc := `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>Invoice</b> over ` + protocol + " " + uuid.NewString()
			e.do(
				chromedp.Navigate(page(allowed, protocol)),
				chromedp.WaitVisible(css("#document")),
				chromedp.SetValue(css("#document"), doc),
				chromedp.Click(css("#submit")),
				chromedp.WaitVisible(css(`#status[data-status="AWAITING_APPROVAL"]`)),
			)
			require.Equal(t, protocol, evaluate[string](e, `document.getElementById("protocol").value`))
			id := evaluate[string](e, `document.getElementById("job-id").textContent`)
			require.NotEmpty(t, id)
			_, err := jobs.ApproveJob(authed(), &oncejobv1.ApproveJobRequest{JobId: id, Approve: true})
			require.NoError(t, err)
			e.do(chromedp.WaitVisible(css(`#status[data-status="SUCCEEDED"]`)))
			e.screenshot("web-example-" + protocol)

			seqs := evaluate[[]string](e, `[...document.querySelectorAll("#events li")].map(li => li.dataset.seq)`)
			for i, s := range seqs {
				require.Equal(t, fmt.Sprint(i+1), s, "seqs from 1, each once: %v", seqs)
			}
			events := evaluate[string](e, `document.getElementById("events").textContent`)
			for _, want := range []string{"QUEUED UPLOADED", "RUNNING", "AWAITING_APPROVAL VALIDATED", "SUCCEEDED PUBLISHED"} {
				require.Contains(t, events, want, "the page shows each event's status and stage")
			}
			require.Less(t, strings.Index(events, "AWAITING_APPROVAL"), strings.Index(events, "PUBLISHED"))
			require.Less(t, strings.Index(events, "AWAITING_APPROVAL"), strings.LastIndex(events, "SUCCEEDED"), "the stages after the approval came live")

			require.Equal(t, doc, evaluate[string](e, `document.getElementById("preview").textContent`), "the document as text")
			require.Contains(t, evaluate[string](e, `document.getElementById("summary").textContent`), "<img src=x", "the summary's markup as text")
			require.Zero(t, evaluate[int](e, `document.querySelectorAll("main img, main script, main b").length`), "no markup became an element")
			require.True(t, evaluate[bool](e, `window.__pwned === undefined`), "no script of the document ran")
		})
	}

	t.Run("origin not allowed", func(t *testing.T) {
		e.t = t
		before, err := jobs.ListJobs(authed(), &oncejobv1.ListJobsRequest{PageSize: 100})
		require.NoError(t, err)
		e.do(
			chromedp.Navigate(page(refused, "connect")),
			chromedp.WaitVisible(css("#document")),
			chromedp.SetValue(css("#document"), "from an origin the server does not allow "+uuid.NewString()),
			chromedp.Click(css("#submit")),
			chromedp.WaitVisible(css("#error")),
		)
		e.screenshot("web-example-refused-origin")
		require.NotEmpty(t, evaluate[string](e, `document.getElementById("error").textContent`))
		require.True(t, evaluate[bool](e, `document.getElementById("job").hidden`))
		after, err := jobs.ListJobs(authed(), &oncejobv1.ListJobsRequest{PageSize: 100})
		require.NoError(t, err)
		require.Len(t, after.GetJobs(), len(before.GetJobs()), "no job was made")
	})
}
