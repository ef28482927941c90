// Package benchkit holds the small helpers the run and batch benchmarks
// share: their items, addresses, the module root and the machine's load.
package benchkit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RootModule is the module whose root FindRoot looks for.
const RootModule = "github.com/oncejob/oncejob"

// WriteItems writes n short JSONL items, one document each, for `oncejob run submit`.
func WriteItems(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, `{"text": "item %d of the benchmark run, a short document"}`+"\n", i)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// WaitListen waits up to 30 s until something accepts connections on addr.
func WaitListen(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			return c.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

// FreeAddr is a loopback address nothing listens on yet.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// FindRoot changes to the root of the oncejob module above the working
// directory and returns it.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module "+RootModule+"\n") {
			return dir, os.Chdir(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", RootModule)
		}
		dir = parent
	}
}

// NumCPU counts the machine's processors as /proc/cpuinfo lists them.
func NumCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// LoadAvg is the one-minute load average, reported beside each figure.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// Tail is the last 2,000 bytes of a process's output, for an error.
func Tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// EnvOr is the environment variable k, or def when it is empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Logf prints a progress line on stderr.
func Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
