// Package pgcluster runs a throwaway PostgreSQL cluster for tests that stop,
// restart or cut the database: its own data directory in a temp dir, its own
// port on loopback, removed by Close. Tests that only need a database use a
// schema of the shared server (storepgtest) instead; a test that takes
// Postgres down must never take down the one every other test uses.
//
// StartPair makes a primary and a streaming standby (pair.go) for the
// failover tests: the primary killed as a lost machine, the standby
// promoted.
//
// It runs Debian's initdb and pg_ctl (found on PATH or under
// /usr/lib/postgresql/*/bin). As root they run as the postgres user (initdb
// refuses root), through runuser.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres: initdb or pg_ctl is not installed. Tests report it as a
// skip with InstallHint, or fail under CI.
var ErrNoPostgres = errors.New("pgcluster: initdb and pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin")

// InstallHint is the command that installs what the package needs.
const InstallHint = "apt-get install -y postgresql"

// ShutdownMode is how Stop ends the server (pg_ctl stop -m).
type ShutdownMode string

const (
	// Fast rolls back open transactions and disconnects clients, with a
	// clean checkpoint: what a service restart does.
	Fast ShutdownMode = "fast"
	// Immediate quits every process at once, without a checkpoint: the next
	// start runs crash recovery, as after a power cut.
	Immediate ShutdownMode = "immediate"
)

// Cluster is one throwaway Postgres server.
type Cluster struct {
	dir    string // owns everything below; removed by Close
	data   string
	port   int
	bin    string
	runAs  string // "" when the current user runs the server
	logDir string
}

// Start creates a cluster in a new temp dir and starts it on a free
// loopback port, with trust auth for user postgres. It does not sync to
// disk (fsync=off): the tests stop the server, never the machine, and
// the page cache survives an immediate shutdown.
func Start(ctx context.Context) (*Cluster, error) {
	return start(ctx, "")
}

// start is Start with extra lines for postgresql.conf.
func start(ctx context.Context, conf string) (*Cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oncejob-pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{dir: dir, data: filepath.Join(dir, "data"), bin: bin, logDir: dir}
	if err := c.init(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.appendConf(conf); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) init(ctx context.Context) error {
	if err := c.own(); err != nil {
		return err
	}
	if _, err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C"); err != nil {
		return err
	}
	port, err := freePort(ctx)
	if err != nil {
		return err
	}
	c.port = port
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 100
fsync = off
full_page_writes = off
shared_buffers = 16MB
log_min_messages = warning
`, port, c.dir)
	return c.appendConf(conf)
}

// own gives c.dir to the user the server runs as: postgres when the
// caller is root (initdb refuses root).
func (c *Cluster) own() error {
	if os.Geteuid() != 0 {
		return nil
	}
	c.runAs = "postgres"
	u, err := user.Lookup(c.runAs)
	if err != nil {
		return fmt.Errorf("pgcluster: running as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

func (c *Cluster) appendConf(conf string) error {
	return c.appendFile("postgresql.conf", conf)
}

// appendFile appends text to a file of the data directory; later settings
// win over earlier ones.
func (c *Cluster) appendFile(name, text string) error {
	f, err := os.OpenFile(filepath.Join(c.data, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// Start starts the stopped server and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	if _, err := c.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", c.data, "-l", filepath.Join(c.logDir, "server.log")); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// Stop shuts the server down in mode and waits until it is gone.
func (c *Cluster) Stop(ctx context.Context, mode ShutdownMode) error {
	_, err := c.run(ctx, "pg_ctl", "stop", "-w", "-t", "60", "-D", c.data, "-m", string(mode))
	return err
}

// Restart stops the server in mode, leaves it down for down, and starts it.
func (c *Cluster) Restart(ctx context.Context, mode ShutdownMode, down time.Duration) error {
	if err := c.Stop(ctx, mode); err != nil {
		return err
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Start(ctx)
}

// Addr is the server's host:port.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }

// URL is a connection URL for database db at addr (the server's own
// address, or a proxy's in front of it).
func URL(addr, db string) string {
	return "postgres://postgres@" + addr + "/" + db + "?sslmode=disable"
}

// URL is a connection URL for database db on the server itself.
func (c *Cluster) URL(db string) string { return URL(c.Addr(), db) }

// Log returns the server's log, for a failing test to show.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.logDir, "server.log"))
	return string(b)
}

// Close stops the server at once and removes everything it wrote.
func (c *Cluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = c.run(ctx, "pg_ctl", "stop", "-w", "-D", c.data, "-m", string(Immediate))
	_ = os.RemoveAll(c.dir)
}

// waitReady waits until a connection succeeds: pg_ctl -w returns once the
// postmaster accepts connections, but after crash recovery the first ones
// may still be refused for a moment.
func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pgcluster: server on %s not ready: %w\n%s", c.Addr(), err, c.Log())
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func (c *Cluster) run(ctx context.Context, tool string, args ...string) (string, error) {
	path := filepath.Join(c.bin, tool)
	// The tools are Postgres's own, found by findBinaries; the arguments
	// are this package's.
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs, "--", path}, args...)...) // #nosec G204
	} else {
		cmd = exec.CommandContext(ctx, path, args...) // #nosec G204
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the postmaster running; it must not hold the
	// caller's output pipes open (a test's `go test` would wait on them).
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("pgcluster: %s %v: %w\n%s", tool, args, err, out.String())
	}
	return out.String(), nil
}

// findBinaries returns the directory holding initdb and pg_ctl: the one on
// PATH, else Debian's newest /usr/lib/postgresql/<version>/bin.
func findBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dir := filepath.Dir(real)
			if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		_, e1 := os.Stat(filepath.Join(d, "initdb"))
		_, e2 := os.Stat(filepath.Join(d, "pg_ctl"))
		if e1 == nil && e2 == nil {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort(ctx context.Context) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}
