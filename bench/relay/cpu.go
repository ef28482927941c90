package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpu is the CPU time (user + system) the processes of a phase used: the
// relays (or the bench, for the plain publisher), their Postgres backends
// and the NATS server. Read from /proc; a figure the load of other
// processes on the machine changes little, unlike the rates.
type cpu struct {
	relay, postgres, nats time.Duration
}

// perK is d per 1,000 of n events, in milliseconds.
func perK(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Milliseconds()) * 1000 / float64(n)
}

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuOf is the CPU time process pid used so far; 0 when it is gone.
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// natsCPU is the CPU time the NATS servers on this machine used so far.
func natsCPU() time.Duration {
	var total time.Duration
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "nats-server" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		total += cpuOf(pid)
	}
	return total
}

// pgCPU is the CPU time each backend connected to the bench database used
// so far.
func (b *bench) pgCPU(ctx context.Context) map[int]time.Duration {
	out := map[int]time.Duration{}
	rows, err := b.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, b.c.db)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			out[pid] = cpuOf(pid)
		}
	}
	return out
}

// cpuMeter measures a phase's CPU from its start.
type cpuMeter struct {
	b    *bench
	pg   map[int]time.Duration
	nats time.Duration
}

func (b *bench) startCPU(ctx context.Context) *cpuMeter {
	return &cpuMeter{b: b, pg: b.pgCPU(ctx), nats: natsCPU()}
}

// used is the CPU since the start: of the relays, of the database's
// backends (those that ended meanwhile are not counted: the relays' pools
// keep theirs) and of NATS.
func (m *cpuMeter) used(ctx context.Context, relays []*proc) cpu {
	var c cpu
	for pid, t := range m.b.pgCPU(ctx) {
		c.postgres += t - m.pg[pid]
	}
	for _, p := range relays {
		c.relay += cpuOf(p.cmd.Process.Pid)
	}
	c.nats = natsCPU() - m.nats
	return c
}
