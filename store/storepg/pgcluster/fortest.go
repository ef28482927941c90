package pgcluster

import (
	"context"
	"errors"
	"os"
	"testing"
)

// ForTest starts a cluster for tb and closes it at cleanup, logging the
// server's log if tb failed. Without Postgres installed it skips tb with the
// install command, and under CI=true fails it instead: CI must run every
// test.
func ForTest(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := Start(context.Background())
	if errors.Is(err, ErrNoPostgres) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v (CI must run this test: %s)", err, InstallHint)
		}
		tb.Skipf("SKIP: %v; install with: %s", err, InstallHint)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("--- throwaway Postgres log (last 4000 bytes) ---\n%s", tail(c.Log(), 4000))
		}
		c.Close()
	})
	return c
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// PairForTest starts a Pair for tb and closes it at cleanup, logging both
// servers' logs if tb failed; without Postgres it skips or fails as
// ForTest does.
func PairForTest(tb testing.TB, repl Replication) *Pair {
	tb.Helper()
	p, err := StartPair(context.Background(), repl)
	if errors.Is(err, ErrNoPostgres) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v (CI must run this test: %s)", err, InstallHint)
		}
		tb.Skipf("SKIP: %v; install with: %s", err, InstallHint)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("--- throwaway primary log (last 4000 bytes) ---\n%s", tail(p.Primary.Log(), 4000))
			tb.Logf("--- throwaway standby log (last 4000 bytes) ---\n%s", tail(p.Standby.Log(), 4000))
		}
		p.Close()
	})
	return p
}
