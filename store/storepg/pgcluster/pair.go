package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replication is how the standby of a Pair confirms the primary's commits.
type Replication string

const (
	// Synchronous: the primary acknowledges a commit only once the standby
	// has flushed it (synchronous_commit = on, the standby named in
	// synchronous_standby_names). An acknowledged commit survives the
	// primary's loss.
	Synchronous Replication = "synchronous"
	// Asynchronous: the primary acknowledges a commit at once and streams
	// it after. What the standby had not received when the primary died is
	// lost on promotion.
	Asynchronous Replication = "asynchronous"
)

// standbyName is the standby's application_name, the name
// synchronous_standby_names waits for.
const standbyName = "standby"

// Pair is a primary and a streaming standby made from its base backup,
// each a Cluster of its own (own directory, own port). A test kills the
// primary (Kill) and promotes the standby (Promote), as an operator or
// pg_auto_failover would.
type Pair struct {
	Primary *Cluster
	Standby *Cluster
}

// StartPair starts a primary, takes a base backup of it
// (pg_basebackup -R) into a standby, starts the standby and waits until
// the primary streams to it (and, when repl is Synchronous, counts it as
// its synchronous standby).
func StartPair(ctx context.Context, repl Replication) (*Pair, error) {
	conf := "\nwal_level = replica\nmax_wal_senders = 4\nwal_keep_size = 64MB\n"
	if repl == Synchronous {
		conf += fmt.Sprintf("synchronous_standby_names = '%s'\nsynchronous_commit = on\n", standbyName)
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(bin, "pg_basebackup")); err != nil {
		return nil, fmt.Errorf("%w (pg_basebackup missing from %s)", ErrNoPostgres, bin)
	}
	primary, err := start(ctx, conf)
	if err != nil {
		return nil, err
	}
	standby, err := primary.standby(ctx)
	if err != nil {
		primary.Close()
		return nil, err
	}
	p := &Pair{Primary: primary, Standby: standby}
	if err := p.waitStreaming(ctx, repl); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// standby makes and starts a streaming standby of c.
func (c *Cluster) standby(ctx context.Context) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "oncejob-pgstandby-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	s := &Cluster{dir: dir, data: filepath.Join(dir, "data"), bin: c.bin, logDir: dir}
	fail := func(err error) (*Cluster, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.own(); err != nil {
		return fail(err)
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", c.port, standbyName)
	if _, err := s.run(ctx, "pg_basebackup", "-d", conninfo, "-D", s.data, "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		return fail(err)
	}
	if s.port, err = freePort(ctx); err != nil {
		return fail(err)
	}
	// The backup copied the primary's settings; these lines win over them.
	// Promoted, the standby has no standby of its own: were it to keep
	// waiting for one (synchronous_standby_names), every commit would
	// hang. A real deployment gives it a new standby (pg_auto_failover
	// does); docs/operations.md, "Failover".
	if err := s.appendConf(fmt.Sprintf("\nport = %d\nunix_socket_directories = '%s'\nhot_standby = on\nsynchronous_standby_names = ''\n", s.port, s.dir)); err != nil {
		return fail(err)
	}
	// -R wrote a primary_conninfo; name the standby in it for
	// synchronous_standby_names, whatever pg_basebackup kept.
	if err := s.appendFile("postgresql.auto.conf", fmt.Sprintf("\nprimary_conninfo = '%s'\n", conninfo)); err != nil {
		return fail(err)
	}
	if err := s.Start(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// waitStreaming waits until the primary reports the standby streaming,
// and synchronous when repl asks for it.
func (p *Pair) waitStreaming(ctx context.Context, repl Replication) error {
	want := "async"
	if repl == Synchronous {
		want = "sync"
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		state, err := p.Primary.replicationState(ctx)
		if err == nil && state == "streaming/"+want {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pgcluster: the standby never streamed %s (last %q, %w)\n%s", want, state, err, p.Standby.Log())
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// replicationState is "state/sync_state" of the standby in the primary's
// pg_stat_replication, "" when it is not connected.
func (c *Cluster) replicationState(ctx context.Context) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(ctx) }()
	var state string
	err = conn.QueryRow(cctx, `SELECT state || '/' || sync_state FROM pg_stat_replication WHERE application_name = $1`, standbyName).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return state, err
}

// URL is a multi-host connection URL for database db that names the
// primary first and the standby second, with
// target_session_attrs=read-write: a client connects to whichever accepts
// writes, so it follows a promotion.
func (p *Pair) URL(db string) string {
	return "postgres://postgres@" + p.Primary.Addr() + "," + p.Standby.Addr() + "/" + db + "?sslmode=disable&target_session_attrs=read-write"
}

// Close closes both servers and removes their directories.
func (p *Pair) Close() {
	p.Primary.Close()
	p.Standby.Close()
}

// Kill SIGKILLs the server's postmaster and every process it started, at
// once, as if its machine were lost: no shutdown checkpoint, no goodbye to
// clients or the standby, commits in flight cut wherever they were. It
// returns when the postmaster was sent SIGKILL, for a test that dates what
// was lost. Start it again only from a fresh base backup; Close still
// removes it.
func (c *Cluster) Kill(ctx context.Context) (time.Time, error) {
	pid, err := c.postmasterPID()
	if err != nil {
		return time.Time{}, err
	}
	pids := append([]int{pid}, children(pid)...)
	killed := time.Now()
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return killed, fmt.Errorf("pgcluster: kill %d: %w", p, err)
		}
	}
	// Wait until the port is closed and every process gone, so the caller
	// sees the outage at once.
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				return killed, fmt.Errorf("pgcluster: process %d outlived SIGKILL", p)
			}
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
				return killed, ctx.Err()
			}
		}
	}
	return killed, nil
}

// Promote ends the standby's recovery (pg_ctl promote) and waits until it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if _, err := c.run(ctx, "pg_ctl", "promote", "-w", "-t", "60", "-D", c.data); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		var inRecovery bool
		if err == nil {
			err = conn.QueryRow(cctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil && !inRecovery {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pgcluster: the promoted standby on %s never accepted writes (%w)\n%s", c.Addr(), err, c.Log())
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// postmasterPID reads the first line of postmaster.pid.
func (c *Cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: is the server running? %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: postmaster.pid: %w", err)
	}
	return pid, nil
}

// alive reports whether pid is a process that has not exited: a zombie
// (exited, not yet reaped by whoever inherited it) is gone for the test.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so read after
		// the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
