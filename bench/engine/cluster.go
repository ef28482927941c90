package main

import (
	"bytes"
	"context"
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

// throwaway is a Postgres cluster of the bench's own, for the account
// (-account): its own data directory in a temp dir, its own port on
// loopback, pg_stat_statements loaded, removed by close. The shared server
// cannot be restarted to load pg_stat_statements. As
// store/storepg/pgcluster does for the tests, it runs Debian's initdb and
// pg_ctl, as user postgres through runuser when the bench runs as root
// (initdb refuses root). Unlike that helper's, this cluster keeps fsync and
// full_page_writes on: the account counts full-page images, and the
// Postgres CPU per job includes the WAL flushes a durable commit waits for.
type throwaway struct {
	dir, data, bin, runAs string
	port                  int
}

// throwawayConf are the settings beyond initdb's: the shared server's
// (autovacuum off, max_connections 300, shared_buffers 128MB), and
// pg_stat_statements counting the statements run inside triggers and
// functions too (track = all), with their planning.
const throwawayConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 300
shared_buffers = 128MB
autovacuum = off
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.track_planning = on
pg_stat_statements.max = 10000
log_min_messages = warning
`

func startThrowaway(ctx context.Context) (*throwaway, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oncejob-bench-account-")
	if err != nil {
		return nil, err
	}
	t := &throwaway{dir: dir, data: filepath.Join(dir, "data"), bin: bin}
	if err := t.init(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if _, err := t.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", t.data, "-l", filepath.Join(dir, "server.log")); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := t.waitReady(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *throwaway) init(ctx context.Context) error {
	if os.Geteuid() == 0 {
		t.runAs = "postgres"
		u, err := user.Lookup(t.runAs)
		if err != nil {
			return fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(t.dir, uid, gid); err != nil {
			return err
		}
	}
	if _, err := t.run(ctx, "initdb", "-D", t.data, "-U", "postgres", "--auth=trust", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C"); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	t.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	f, err := os.OpenFile(filepath.Join(t.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, throwawayConf, t.port, t.dir); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// url is the server's URL without a database, as -pg takes it.
func (t *throwaway) url() string {
	return "postgres://postgres@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(t.port))
}

func (t *throwaway) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, t.url()+"/postgres?sslmode=disable")
		if err == nil {
			return conn.Close(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("throwaway Postgres on port %d not ready: %w", t.port, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// close stops the server at once and removes everything it wrote.
func (t *throwaway) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = t.run(ctx, "pg_ctl", "stop", "-w", "-D", t.data, "-m", "immediate")
	_ = os.RemoveAll(t.dir)
}

func (t *throwaway) run(ctx context.Context, tool string, args ...string) (string, error) {
	path := filepath.Join(t.bin, tool)
	var cmd *exec.Cmd
	if t.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", t.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the postmaster running: it must not hold the
	// bench's pipes open.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %v: %w\n%s", tool, args, err, out.String())
	}
	return out.String(), nil
}

// postgresBin is the directory of initdb and pg_ctl: on PATH, else
// Debian's newest /usr/lib/postgresql/<version>/bin.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if _, err := os.Stat(filepath.Join(filepath.Dir(real), "pg_ctl")); err == nil {
				return filepath.Dir(real), nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb and pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin (apt-get install -y postgresql)")
}
