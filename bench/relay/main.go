// Command relay benchmarks oncejob's outbox relay: events per second from
// the commit of the transition that announces them to the receiver that
// applies them, for a webhook sink (a loopback receiver in this process that
// verifies each signature and applies each event once) and a NATS JetStream
// sink (a consumer in this process), with one and two `oncejob relay`
// processes; the delivery lag (commit to applied) p50/p99 at a steady 1,000
// events/s; and, in the same run, a plain JetStream publisher with message
// ids and acks in batches of the relay's own publish batch - the peer.
//
//	cd bench && go run ./relay
//	cd bench && go run ./relay -before DIR   # DIR: git archive <commit> | tar -x -C DIR
//
// With -before, each phase runs the relay of that tree and of this one, one
// right after the other (-rounds times, alternating which goes first), and
// the report gives both against the one peer.
//
// Needs: Go, Postgres (-pg, trust auth) and NATS with JetStream (-nats).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const rootModule = "github.com/oncejob/oncejob"

// routePage is how many claim batches a relay routes in one round: on
// Postgres a routing publishes its JetStream deliveries in one batch of up
// to routePage * --relay-batch-size (relay.routeLimit), so the peer
// publishes batches of that size - equal batch size.
const routePage = 5

type config struct {
	pg, db, natsURL string
	events          int
	batch           int
	peerBatch       int
	loops           int
	rate            int
	rateFor         time.Duration
	root            string
	before          string
	rounds          int
	keep            bool
	sinks           []string
}

func main() {
	var c config
	flag.StringVar(&c.pg, "pg", envOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "Postgres admin URL")
	flag.StringVar(&c.db, "db", "oncejob_bench_relay", "database created (dropped first) for the run")
	flag.StringVar(&c.natsURL, "nats", nats.DefaultURL, "NATS with JetStream")
	flag.IntVar(&c.events, "events", 20000, "events per throughput phase")
	flag.IntVar(&c.batch, "batch", 100, "the relay's claim batch (--relay-batch-size)")
	flag.IntVar(&c.peerBatch, "peer-batch", 0, "the plain publisher's batch (default: the relay's routing page, routePage)")
	flag.IntVar(&c.loops, "loops", 1, "relay loops per relay process (--relays)")
	flag.IntVar(&c.rate, "rate", 1000, "events/s of the lag phases")
	flag.DurationVar(&c.rateFor, "rate-for", 10*time.Second, "length of the lag phases")
	flag.StringVar(&c.root, "root", "", "oncejob module root (default: found above the working directory)")
	flag.StringVar(&c.before, "before", "", "another oncejob tree (a git archive of the commit before a change): its relay is measured in the same run, each phase alternating with the root's")
	flag.IntVar(&c.rounds, "rounds", 1, "times each phase runs (per tree, alternating)")
	flag.BoolVar(&c.keep, "keep", false, "keep the database and the temp dir")
	sinks := flag.String("sinks", "webhook,jetstream", "the sinks measured, of webhook and jetstream")
	flag.Parse()
	c.sinks = strings.Split(*sinks, ",")
	if c.peerBatch <= 0 {
		c.peerBatch = routePage * c.batch
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	c       config
	dir     string
	bin     string // the relay binary of the phase running
	trees   []tree
	dbURL   string
	pool    *pgxpool.Pool
	js      jetstream.JetStream
	secret  []byte
	applied *tracker
}

// tree is an oncejob tree whose relay is measured: the root's ("after"),
// and -before's.
type tree struct{ name, bin string }

func run(ctx context.Context, c config) error {
	for _, sink := range c.sinks {
		if sink != "webhook" && sink != "jetstream" {
			return fmt.Errorf("-sinks: %q is neither webhook nor jetstream", sink)
		}
	}
	if c.root == "" {
		var err error
		if c.root, err = findRoot(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "bench-relay-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	b := &bench{c: c, dir: dir}
	if err := b.build(ctx); err != nil {
		return err
	}
	nc, err := nats.Connect(c.natsURL)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	if b.js, err = jetstream.New(nc); err != nil {
		return err
	}
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	b.secret = key
	rows, best, err := b.phases(ctx)
	if err != nil {
		return err
	}
	plain, err := b.plainPublisher(ctx, c.peerBatch)
	if err != nil {
		return fmt.Errorf("plain publisher: %w", err)
	}
	rows = append(rows, row{fmt.Sprintf("plain JetStream publisher, Nats-Msg-Id, acks per batch of %d", c.peerBatch), plain})
	if c.batch != c.peerBatch { // the claim batch, the peer of the figures before 2026-12-05
		small, err := b.plainPublisher(ctx, c.batch)
		if err != nil {
			return fmt.Errorf("plain publisher: %w", err)
		}
		rows = append(rows, row{fmt.Sprintf("plain JetStream publisher, Nats-Msg-Id, acks per batch of %d (the claim batch)", c.batch), small})
	}
	report(c, rows, best, plain)
	return nil
}

// build builds ./cmd/oncejob of the root and, with -before, of that tree.
func (b *bench) build(ctx context.Context) error {
	if b.c.before != "" {
		b.trees = append(b.trees, tree{"before", filepath.Join(b.dir, "oncejob-before")})
	}
	b.trees = append(b.trees, tree{"after", filepath.Join(b.dir, "oncejob")})
	for _, t := range b.trees {
		root := b.c.root
		if t.name == "before" {
			root = b.c.before
		}
		logf("building ./cmd/oncejob of %s (%s)", root, t.name)
		if err := cmdRun(ctx, root, "go", "build", "-o", t.bin, "./cmd/oncejob"); err != nil {
			return err
		}
	}
	return nil
}

// phases runs every throughput and lag phase, -rounds times, each tree's
// right after the other's; best is each tree's fastest JetStream phase.
func (b *bench) phases(ctx context.Context) (rows []row, best map[string]result, err error) {
	best = map[string]result{}
	name := func(t tree, s string) string {
		if len(b.trees) == 1 {
			return s
		}
		return t.name + ": " + s
	}
	for round := range b.c.rounds {
		for _, sink := range b.c.sinks {
			for _, procs := range []int{1, 2} {
				for _, t := range b.alternate(round) {
					b.bin = t.bin
					r, err := b.throughput(ctx, sink, procs)
					if err != nil {
						return nil, nil, fmt.Errorf("%s, %s, %d relays: %w", t.name, sink, procs, err)
					}
					if sink == "jetstream" && r.rate > best[t.name].rate {
						best[t.name] = r
					}
					rows = append(rows, row{name(t, fmt.Sprintf("%s, %d relay(s), backlog of %d", sink, procs, b.c.events)), r})
				}
			}
		}
		for _, sink := range b.c.sinks {
			for _, t := range b.alternate(round) {
				b.bin = t.bin
				r, err := b.lag(ctx, sink)
				if err != nil {
					return nil, nil, fmt.Errorf("%s, %s lag: %w", t.name, sink, err)
				}
				rows = append(rows, row{name(t, fmt.Sprintf("%s, 1 relay, steady %d/s", sink, b.c.rate)), r})
			}
		}
	}
	return rows, best, nil
}

// alternate is the trees in the order of a round: before first in even
// rounds, after first in odd ones.
func (b *bench) alternate(round int) []tree {
	if round%2 == 0 || len(b.trees) < 2 {
		return b.trees
	}
	return []tree{b.trees[len(b.trees)-1], b.trees[0]}
}

type row struct {
	name string
	result
}

// report prints the phases' table: best is each tree's best JetStream
// throughput phase, plain the peer.
func report(c config, rows []row, best map[string]result, plain result) {
	fmt.Printf("\nrelay bench, %s, load average %s\n\n", time.Now().Format(time.RFC3339), loadavg())
	fmt.Printf("| phase | events/s | lag p50 | lag p99 | CPU ms per 1,000 events: relays (bench) / Postgres / NATS |\n|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		lag, used := "| |", ""
		if r.p99 > 0 {
			lag = fmt.Sprintf("| %s | %s |", r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond))
		}
		if r.cpu != (cpu{}) {
			used = fmt.Sprintf("%.0f / %.0f / %.0f", perK(r.cpu.relay, c.events), perK(r.cpu.postgres, c.events), perK(r.cpu.nats, c.events))
		}
		fmt.Printf("| %s | %.0f %s %s |\n", r.name, r.rate, lag, used)
	}
	for _, name := range []string{"before", "after"} {
		if r := best[name]; r.rate > 0 {
			fmt.Printf("\n%s: relay -> JetStream / plain publisher at equal batch (%d): %.2fx (best of 1 and 2 relays; target >= 0.5x)\n", name, c.peerBatch, r.rate/plain.rate)
			total := func(c cpu) time.Duration { return c.relay + c.postgres + c.nats }
			fmt.Printf("%s: CPU per event, relay -> JetStream (that run) / plain publisher: %.1fx\n", name, float64(total(r.cpu))/float64(total(plain.cpu)))
		}
	}
	for _, r := range rows {
		if strings.Contains(r.name, "steady") {
			fmt.Printf("lag p99, %s: %s (target < 100ms)\n", r.name, r.p99.Round(100*time.Microsecond))
		}
	}
}

type result struct {
	rate     float64
	p50, p99 time.Duration
	cpu      cpu // throughput phases and the plain publisher
}

// phase sets up a fresh database, a sink and its receiver.
func (b *bench) phase(ctx context.Context, sink string) (configPath string, stopRecv func(), err error) {
	admin, err := pgx.Connect(ctx, b.c.pg)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, b.c.db)); err != nil {
		return "", nil, err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, b.c.db)); err != nil {
		return "", nil, err
	}
	cfg := admin.Config()
	b.dbURL = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, b.c.db)
	if err := cmdRun(ctx, b.dir, b.bin, "migrate", "--database-url", b.dbURL); err != nil {
		return "", nil, err
	}
	if b.pool != nil {
		b.pool.Close()
	}
	if b.pool, err = pgxpool.New(ctx, b.dbURL); err != nil {
		return "", nil, err
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO documents (tenant, sha256, media_type, data, size_bytes) VALUES ('default', 'bench', 'text/plain', 'x', 1)`); err != nil {
		return "", nil, err
	}
	b.applied = newTracker()

	var sinkYAML string
	switch sink {
	case "webhook":
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		srv := &http.Server{Handler: b.webhookReceiver()}
		go func() { _ = srv.Serve(lis) }()
		stopRecv = func() { _ = srv.Close() }
		secretPath := filepath.Join(b.dir, "secret")
		if err := os.WriteFile(secretPath, []byte("whsec_"+base64.StdEncoding.EncodeToString(b.secret)), 0o600); err != nil {
			return "", nil, err
		}
		sinkYAML = fmt.Sprintf("webhook: {url: 'http://%s/hook', secret: {file: %s}, allow_private_network: true}", lis.Addr(), secretPath)
	case "jetstream":
		suffix := fmt.Sprint(time.Now().UnixNano())
		stream, prefix := "BENCH_RELAY_"+suffix, "benchrelay"+suffix
		if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Duplicates: 2 * time.Minute}); err != nil {
			return "", nil, err
		}
		cons, err := b.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			return "", nil, err
		}
		cc, err := cons.Consume(func(m jetstream.Msg) { b.applied.apply(m.Headers().Get(jetstream.MsgIDHeader), m.Data()) })
		if err != nil {
			return "", nil, err
		}
		stopRecv = func() { cc.Stop(); _ = b.js.DeleteStream(context.Background(), stream) }
		sinkYAML = fmt.Sprintf("jetstream: {url: '%s', stream: %s, subject_prefix: %s}", b.c.natsURL, stream, prefix)
	}
	configPath = filepath.Join(b.dir, "oncejob.yaml")
	doc := fmt.Sprintf("sinks:\n  - name: bench\n    tenant: default\n    events: [job.succeeded]\n    %s\n", sinkYAML)
	return configPath, stopRecv, os.WriteFile(configPath, []byte(doc), 0o600)
}

// throughput: a backlog of events committed with no relay running, then the
// relays start; the clock runs from their start to the last event applied.
func (b *bench) throughput(ctx context.Context, sink string, procs int) (result, error) {
	configPath, stopRecv, err := b.phase(ctx, sink)
	if err != nil {
		return result{}, err
	}
	defer stopRecv()
	if err := b.announce(ctx, b.c.events); err != nil {
		return result{}, err
	}
	if _, err := b.pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return result{}, err
	}
	logf("%s, %d relay(s): %d events waiting", sink, procs, b.c.events)
	meter := b.startCPU(ctx)
	start := time.Now()
	relays, err := b.startRelays(ctx, configPath, fmt.Sprintf("%s-backlog-%d", sink, procs), procs)
	if err != nil {
		return result{}, err
	}
	defer stopAll(relays)
	if err := b.applied.wait(ctx, b.c.events, 5*time.Minute, relays); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	used := meter.used(ctx, relays)
	p50, p99 := b.applied.lag()
	logf("  %d applied in %s: %.0f/s", b.c.events, elapsed.Round(time.Millisecond), float64(b.c.events)/elapsed.Seconds())
	return result{rate: float64(b.c.events) / elapsed.Seconds(), p50: p50, p99: p99, cpu: used}, nil
}

// lag: one relay running, events committed at a steady rate in small
// batches; the lag of each is the time from its commit to its apply.
func (b *bench) lag(ctx context.Context, sink string) (result, error) {
	configPath, stopRecv, err := b.phase(ctx, sink)
	if err != nil {
		return result{}, err
	}
	defer stopRecv()
	relays, err := b.startRelays(ctx, configPath, sink+"-lag", 1)
	if err != nil {
		return result{}, err
	}
	defer stopAll(relays)
	time.Sleep(time.Second) // the relay's LISTEN connection is up
	const tick = 10 * time.Millisecond
	perTick := max(1, b.c.rate*int(tick)/int(time.Second))
	total := 0
	start := time.Now()
	ticker := time.NewTicker(tick)
	for time.Since(start) < b.c.rateFor {
		<-ticker.C
		if err := b.announce(ctx, perTick); err != nil {
			return result{}, err
		}
		total += perTick
	}
	ticker.Stop()
	sent := time.Since(start)
	if err := b.applied.wait(ctx, total, time.Minute, relays); err != nil {
		return result{}, err
	}
	p50, p99 := b.applied.lag()
	logf("%s lag at %d/s: %d events, p50 %s p99 %s", sink, b.c.rate, total, p50, p99)
	return result{rate: float64(total) / sent.Seconds(), p50: p50, p99: p99}, nil
}

// announce commits n job.succeeded events in one statement: jobs inserted
// succeeded, whose trigger writes each one's outbox event, as the engine's
// publish would. The commit time is the moment the statement returns; the
// payload's time is the transaction's start, a little earlier.
func (b *bench) announce(ctx context.Context, n int) error {
	tag, err := b.pool.Exec(ctx, `INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status, stage, output, document_sha256, document_media_type, document_size_bytes)
		SELECT gen_random_uuid(), 'default', 'k' || g || random(), 'd' || g || random(), 'summarize', 1, 'succeeded', 'published', '{"summary": "bench"}', 'bench', 'text/plain', 1
		FROM generate_series(1, $1) AS g`, n)
	if err == nil && tag.RowsAffected() != int64(n) {
		err = fmt.Errorf("inserted %d of %d", tag.RowsAffected(), n)
	}
	if err != nil {
		return err
	}
	// After the commit the store announces committed events on its channel
	// (store/storepg/notifier.go), which wakes the relays; do the same.
	_, err = b.pool.Exec(ctx, `SELECT pg_notify('oncejob_events_public', gen_random_uuid()::text || ' 1 default')`)
	return err
}

// startRelays starts procs relay processes, each logging to
// <binary>-<phase>-<i>.log in the run's directory (-keep keeps it).
func (b *bench) startRelays(ctx context.Context, configPath, phase string, procs int) ([]*proc, error) {
	var out []*proc
	for i := range procs {
		p, err := startProc(fmt.Sprintf("relay-%d", i), filepath.Join(b.dir, fmt.Sprintf("%s-%s-%d.log", filepath.Base(b.bin), phase, i)), b.bin,
			"relay", "--database-url", b.dbURL, "--config", configPath, "--relay-batch-size", fmt.Sprint(b.c.batch), "--relays", fmt.Sprint(b.c.loops), "--log-level", "warn")
		if err != nil {
			stopAll(out)
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// webhookReceiver verifies the Standard Webhooks signature of each request
// (HMAC-SHA256 of id.timestamp.body) and applies each event once.
func (b *bench) webhookReceiver() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		mac := hmac.New(sha256.New, b.secret)
		fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if !slices.ContainsFunc(strings.Fields(r.Header.Get("webhook-signature")), func(s string) bool { return hmac.Equal([]byte(s), []byte(want)) }) {
			http.Error(w, "bad signature", 401)
			return
		}
		b.applied.apply(id, body)
		w.WriteHeader(http.StatusNoContent)
	})
}

// plainPublisher publishes the same number of events as a throughput phase
// straight to a stream, with Nats-Msg-Id, in batches of the relay's publish
// batch (-peer-batch) or another: each batch published asynchronously, then every ack
// awaited.
func (b *bench) plainPublisher(ctx context.Context, batch int) (result, error) {
	suffix := fmt.Sprint(time.Now().UnixNano())
	stream, subject := "BENCH_PLAIN_"+suffix, "benchplain"+suffix+".default.job.succeeded"
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Duplicates: 2 * time.Minute}); err != nil {
		return result{}, err
	}
	defer b.js.DeleteStream(context.Background(), stream)
	payload := bytes.Repeat([]byte("x"), 600) // about an envelope's size
	self, nats0 := selfCPU(), natsCPU()
	start := time.Now()
	for sent := 0; sent < b.c.events; {
		n := min(batch, b.c.events-sent)
		acks := make([]jetstream.PubAckFuture, n)
		for i := range n {
			m := nats.NewMsg(subject)
			m.Data = payload
			m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("plain-%d", sent+i))
			f, err := b.js.PublishMsgAsync(m)
			if err != nil {
				return result{}, err
			}
			acks[i] = f
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return result{}, err
			case <-time.After(10 * time.Second):
				return result{}, fmt.Errorf("no ack")
			}
		}
		sent += n
	}
	rate := float64(b.c.events) / time.Since(start).Seconds()
	used := cpu{relay: selfCPU() - self, nats: natsCPU() - nats0}
	logf("plain publisher: %d in batches of %d: %.0f/s", b.c.events, batch, rate)
	return result{rate: rate, cpu: used}, nil
}

// tracker applies events once and keeps each one's lag.
type tracker struct {
	mu    sync.Mutex
	seen  map[string]bool
	lags  []time.Duration
	dupes atomic.Int64
	count atomic.Int64
}

func newTracker() *tracker { return &tracker{seen: map[string]bool{}} }

func (t *tracker) apply(id string, body []byte) {
	now := time.Now()
	var env struct {
		Time time.Time `json:"time"`
	}
	_ = json.Unmarshal(body, &env)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[id] {
		t.dupes.Add(1)
		return
	}
	t.seen[id] = true
	t.lags = append(t.lags, now.Sub(env.Time))
	t.count.Add(1)
}

func (t *tracker) wait(ctx context.Context, n int, timeout time.Duration, relays []*proc) error {
	deadline := time.Now().Add(timeout)
	for int(t.count.Load()) < n {
		for _, p := range relays {
			if p.exited() {
				return fmt.Errorf("relay exited: %s", p.tail())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d events applied after %s", t.count.Load(), n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

func (t *tracker) lag() (p50, p99 time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := slices.Clone(t.lags)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, 0
	}
	return l[len(l)/2], l[len(l)*99/100]
}

// Processes and helpers.

type proc struct {
	name, logPath string
	cmd           *exec.Cmd
	logFile       *os.File
	done          chan error
	err           error
	ended         bool
}

func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCEJOB_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, logFile: lf, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

func (p *proc) exited() bool {
	if p.ended {
		return true
	}
	select {
	case err := <-p.done:
		p.err, p.ended = err, true
		return true
	default:
		return false
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("%s (%v):\n%s", p.name, p.err, b)
}

func (p *proc) stop() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case p.err = <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			p.err = <-p.done
		}
		p.ended = true
	}
	p.logFile.Close()
}

func stopAll(ps []*proc) {
	for _, p := range ps {
		p.stop()
	}
}

func cmdRun(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, buf.String())
	}
	return nil
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "module "+rootModule {
					f.Close()
					return dir, nil
				}
			}
			f.Close()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: pass -root", rootModule)
		}
		dir = parent
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
