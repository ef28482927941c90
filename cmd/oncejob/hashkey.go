package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/oncejob/oncejob/server/tenant"
)

// runHashKey reads an API key from stdin (so it stays out of shell history)
// and prints the line to put in the --api-keys file.
func runHashKey(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("hash-key", flag.ContinueOnError)
	tenantName := fs.String("tenant", "TENANT", "tenant the key belongs to")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	key := strings.TrimSpace(line)
	if key == "" {
		if err != nil {
			return fmt.Errorf("read key from stdin: %w", err)
		}
		return errors.New("empty key on stdin")
	}
	fmt.Printf("  - tenant: %s\n    sha256: %s\n", *tenantName, tenant.HashKey(key))
	return nil
}
