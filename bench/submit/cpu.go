package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU per operation: on a machine shared with other work a phase's rate
// moves with what else runs, its CPU per operation much less. cpuSnap is
// the CPU time used so far by the server process and by the Postgres
// backends connected to its database (their process titles name it).
type cpuSnap struct {
	server, postgres time.Duration
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

func takeCPU(serverPid int, db string) cpuSnap {
	s := cpuSnap{server: procCPU(serverPid)}
	if db == "" {
		return s
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.HasPrefix(cmd, []byte("postgres: ")) {
			continue
		}
		// "postgres: [CLUSTER: ]USER DB HOST(PORT) STATE"
		f := strings.Fields(string(cmd))
		for i := 2; i < len(f) && i < 4; i++ {
			if f[i] == db {
				pid, _ := strconv.Atoi(filepath.Base(d))
				s.postgres += procCPU(pid)
				break
			}
		}
	}
	return s
}

// procCPU is pid's user and system time, 0 if it is gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
}

// cpuNote is the CPU per operation between two snapshots: the server's
// and its database's backends', in µs.
func cpuNote(a, b cpuSnap, ops uint64) (string, float64, float64) {
	if ops == 0 {
		return "", 0, 0
	}
	srv := float64((b.server - a.server).Microseconds()) / float64(ops)
	pg := float64((b.postgres - a.postgres).Microseconds()) / float64(ops)
	return fmt.Sprintf("CPU/op server %.0f µs, Postgres %.0f µs", srv, pg), srv, pg
}
