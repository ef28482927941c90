package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

// runMigrate applies the migrations to Postgres and exits: what --migrate
// does at the start of serve and worker, alone.
func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	stf := storeFlags(fs, false)
	configFlag(fs) // --database-url from the file
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if stf.databaseURL == "" {
		return errors.New("--database-url (or ONCEJOB_DATABASE_URL) is required")
	}
	stf.migrate = true
	st, _, _, err := stf.open(ctx)
	if err != nil {
		return err
	}
	st.Close()
	fmt.Println("migrations applied")
	return nil
}
