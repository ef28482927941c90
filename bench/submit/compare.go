package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/bojand/ghz/runner"
)

// tree is a server build -before compares: this tree (label "") or another.
type tree struct {
	label string // "" for this tree, "@DIR" for a -before tree
	db    string // its database's name
	root  string
	bin   string
	dbURL string
	ready bool // its database has the replay keys
}

func (t *tree) name() string {
	if t.label == "" {
		return "this tree"
	}
	return t.label
}

// compareTrees runs the server phases (new keys, replays, SubmitJobs) of
// every tree, each on its own database, -rounds times, the trees in the
// other order every odd round, a fresh server and warmup each time; then
// the peers once; and prints every phase and, per tree, the median of the
// rounds with its ratio to the peer and to the first -before tree.
func compareTrees(ctx context.Context, c config, trees []*tree, tmp, riverURL string) error {
	rounds := c.rounds
	if rounds <= 0 {
		rounds = 2
	}
	var main *phases
	loadBefore := loadavg()
	var results []result
	byTree := make(map[string]map[string][]float64)       // tree -> phase -> rates
	cpuByTree := make(map[string]map[string][][2]float64) // tree -> phase -> server, Postgres CPU µs/op
	for r := range rounds {
		order := append([]*tree(nil), trees...)
		if r%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, t := range order {
			tc := c
			tc.root = t.root
			srv, addr, err := tc.startPgServer(ctx, t.bin, tmp, t.dbURL)
			if err != nil {
				return err
			}
			p := newPhases(tc, addr, t.dbURL, tmp, riverURL)
			p.serverPid, p.db = srv.cmd.Process.Pid, t.db
			switch {
			case t.label == "" && !t.ready:
				err = p.prepare(ctx)
				main = p
			case !t.ready:
				err = p.warmupAndReplayKeys(ctx)
			default:
				err = p.warmup(ctx)
			}
			t.ready = true
			if err != nil {
				srv.stop()
				return fmt.Errorf("%s: %w", t.name(), err)
			}
			logf("round %d, %s (load %s)", r+1, t.name(), loadavg())
			res, err := p.server(ctx)
			srv.stop()
			if err != nil {
				return fmt.Errorf("%s: %w", t.name(), err)
			}
			if byTree[t.name()] == nil {
				byTree[t.name()] = make(map[string][]float64)
				cpuByTree[t.name()] = make(map[string][][2]float64)
			}
			for _, x := range res {
				byTree[t.name()][x.name] = append(byTree[t.name()][x.name], x.rate)
				cpuByTree[t.name()][x.name] = append(cpuByTree[t.name()][x.name], [2]float64{x.serverCPU, x.pgCPU})
				x.name = fmt.Sprintf("%s, %s, round %d", x.name, t.name(), r+1)
				results = append(results, x)
			}
		}
	}
	main.addr = "" // the peers need no server
	pg, err := main.postgres(ctx)
	if err != nil {
		// The trees' figures stand on their own: print them.
		logf("peers: %v (the ratios to them are left out)", err)
		pg = nil
	}
	results = append(results, pg...)
	printResults(os.Stdout, c, results)

	printMedians(rounds, trees, byTree, cpuByTree, pg)
	fmt.Printf("load average (1m) before/after: %s / %s on %d CPUs\n", loadBefore, loadavg(), runtime.NumCPU())
	return nil
}

// warmup is the new-key warmup alone, for a server started again on a
// database that has its replay keys.
func (p *phases) warmup(ctx context.Context) error {
	if p.c.warmup <= 0 {
		return nil
	}
	logf("warmup: new keys for %s", p.c.warmup)
	_, err := p.g.run(ctx, "warmup", p.newBody, `{"idempotency-key":"warm-{{.UUID}}"}`, runner.WithRunDuration(p.c.warmup))
	return err
}

// medianOf is the median of xs and xs, as "m (x, y, ...)".
func medianOf(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return fmt.Sprintf("%.0f (%s)", median(xs), strings.Join(parts, ", "))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printMedians prints, per phase and tree, the rounds' rates, their median
// and its ratios to the peer and to the first -before tree, with the median
// CPU per operation of the server and of Postgres.
func printMedians(rounds int, trees []*tree, byTree map[string]map[string][]float64, cpuByTree map[string]map[string][][2]float64, pg []result) {
	peers := make(map[string]float64)
	for _, x := range pg {
		peers[x.name] = x.rate
	}
	fmt.Printf("\nmedians of %d rounds\n\n", rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "phase\t tree\t rates/s\t median/s\t peer/s\t ratio to peer\t vs "+trees[min(1, len(trees)-1)].name()+"\t CPU/op server µs\t Postgres µs\t")
	for _, ph := range []struct{ name, peer string }{{nameNewKey, namePgInsert}, {nameReplay, namePgConflict}, {nameBatch, nameRiver}} {
		base := median(byTree[trees[1].name()][ph.name])
		for _, t := range trees {
			rates := byTree[t.name()][ph.name]
			m := median(rates)
			var rs []string
			for _, x := range rates {
				rs = append(rs, fmt.Sprintf("%.0f", x))
			}
			var srv, pg []float64
			for _, x := range cpuByTree[t.name()][ph.name] {
				srv, pg = append(srv, x[0]), append(pg, x[1])
			}
			peer := peers[ph.peer] // 0 when the peers failed: +Inf
			fmt.Fprintf(tw, "%s\t %s\t %s\t %.0f\t %.0f\t %.2f\t %.2f\t %s\t %s\t\n", ph.name, t.name(), strings.Join(rs, ", "), m, peer, m/peer, m/base,
				medianOf(srv), medianOf(pg))
		}
	}
	tw.Flush()
}
