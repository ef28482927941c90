package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk"
)

const python = "/usr/bin/python3"

// requirePython skips (or, under CI=true, fails) a test when Debian's
// python3 lacks grpc, protobuf, idna, pytest or psycopg2 (the Python
// receiver's Postgres tests), saying how to install them.
func requirePython(t *testing.T) {
	t.Helper()
	probe := exec.Command(python, "-c", "import grpc, google.protobuf, idna, pytest, psycopg2")
	if out, err := probe.CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIP: %s cannot import grpc, protobuf, idna, pytest and psycopg2 (%v: %s); install with: apt-get install -y python3-grpcio python3-protobuf python3-idna python3-pytest python3-psycopg2", python, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// TestPythonSDK runs the Python SDK's pytest suite (clientsdk/python/tests)
// against the real binary: a slow embedded server, the fault proxy in front
// of it, and two replicas on one Postgres schema, with an HTTP control API
// the Python tests use to set faults, step the cluster's job and stop a
// replica. It also hands them random payloads with Go's WorkIDs.
func TestPythonSDK(t *testing.T) {
	t.Parallel()
	requirePython(t)
	// Each job's call takes 3 s: test_watch_survives_three_cuts needs its
	// three cuts and reconnects to land while the job runs, and at 1.5 s a
	// loaded machine (CI, load 30) once let the job end first.
	addr := serveSlow(t, 3*time.Second)
	proxy := startProxy(t, addr)

	cl := newWatchCluster(t)
	jobID := cl.submit(t, 1)[0]
	steps := cl.steps(t, 1)
	var mu sync.Mutex
	next := 0
	mux := http.NewServeMux()
	mux.Handle("/proxy/", http.StripPrefix("/proxy", proxy.ControlHandler()))
	mux.HandleFunc("POST /cluster/step", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(steps) {
			http.Error(w, "no steps left", http.StatusConflict)
			return
		}
		steps[next]()
		next++
	})
	mux.HandleFunc("POST /cluster/stop", func(http.ResponseWriter, *http.Request) { cl.replicas[0].stop() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	control := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = control.Serve(lis) }()
	t.Cleanup(func() { _ = control.Close() })

	cmd := exec.Command(python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests")
	cmd.Dir = "../../clientsdk/python"
	cmd.Env = append(os.Environ(),
		"PYTHONDONTWRITEBYTECODE=1",
		"ONCEJOB_ADDR="+addr,
		"ONCEJOB_PROXY_ADDR="+proxy.Addr(),
		"ONCEJOB_CONTROL=http://"+lis.Addr().String(),
		"ONCEJOB_REPLICAS="+cl.replicas[0].addr+","+cl.replicas[1].addr,
		"ONCEJOB_CLUSTER_JOB="+jobID,
		"ONCEJOB_WORKID_RANDOM="+randomWorkIDs(t, 2000),
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `\d+ passed`, string(out))
	require.NotContains(t, string(out), "skipped", "every Python test must run here:\n%s", out)
	t.Logf("%s", out)
}

// randomWorkIDs writes n random JSON payloads — numbers of every magnitude,
// strings with white space, control and astral characters, nested
// objects — with Go's WorkID of each, and returns the file's path.
func randomWorkIDs(t *testing.T, n int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	type item struct {
		Payload string `json:"payload"`
		WorkID  string `json:"work_id"`
	}
	items := make([]item, 0, n)
	for range n {
		v := randomValue(rng, 3)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		id, err := clientsdk.WorkID("random.case", 1, json.RawMessage(b))
		require.NoError(t, err)
		items = append(items, item{Payload: string(b), WorkID: id})
	}
	path := filepath.Join(t.TempDir(), "random_workids.json")
	b, err := json.Marshal(items)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

func randomValue(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(8); {
	case depth > 0 && k == 0:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[randomString(rng)] = randomValue(rng, depth-1)
		}
		return m
	case depth > 0 && k == 1:
		a := []any{}
		for range rng.IntN(4) {
			a = append(a, randomValue(rng, depth-1))
		}
		return a
	case k <= 3:
		return randomString(rng)
	default:
		return json.Number(randomNumber(rng))
	}
}

func randomNumber(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return strconv.FormatInt(rng.Int64N(1<<62)-1<<61, 10)
	case 1:
		return strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(40)-20)), 'g', -1, 64)
	case 2:
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "0"
		}
		return strconv.FormatFloat(f, 'e', rng.IntN(20), 64)
	}
	return fmt.Sprintf("%d.%de%d", rng.IntN(1000), rng.IntN(1000), rng.IntN(60)-30)
}

func randomString(rng *rand.Rand) string {
	alphabet := []rune("aZ09 _-\t\n\"\\/\u00a0\u00e9\u2028\u3000\u200b\u0001\u001c\U0001F600\ufeff<>&")
	r := make([]rune, rng.IntN(8))
	for i := range r {
		r[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(r)
}

// TestPythonSDKInstallsOffline: `pip install` of clientsdk/python into a
// virtual environment that sees Debian's grpcio and protobuf, with no
// package index, and the installed package works from elsewhere.
func TestPythonSDKInstallsOffline(t *testing.T) {
	t.Parallel()
	requirePython(t)
	if out, err := exec.Command(python, "-c", "import setuptools, wheel, venv").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIP: %s lacks setuptools, wheel or venv (%s); install with: apt-get install -y python3-setuptools python3-wheel python3-venv", python, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	// A copy, so the build leaves nothing in the source tree.
	src := filepath.Join(dir, "src")
	require.NoError(t, os.CopyFS(src, os.DirFS("../../clientsdk/python")))
	venv := filepath.Join(dir, "venv")
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v:\n%s", name, args, out)
		return string(out)
	}
	run(python, "-m", "venv", "--system-site-packages", venv)
	run(filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", src)
	out := run(filepath.Join(venv, "bin", "python"), "-c",
		"import oncejob, oncejob.v1.job_pb2; print(oncejob.__file__); print(oncejob.work_id('k', 1, {'a': 1}))")
	require.Contains(t, out, filepath.Join(venv, "lib"))
	want, err := clientsdk.WorkID("k", 1, map[string]any{"a": 1})
	require.NoError(t, err)
	require.Contains(t, out, want)
}
