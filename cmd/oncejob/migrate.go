package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/oncejob/oncejob/store/storepg"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	databaseURL := fs.String("database-url", "", "Postgres URL")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *databaseURL == "" {
		return errors.New("--database-url (or ONCEJOB_DATABASE_URL) is required")
	}
	st, err := storepg.Open(ctx, *databaseURL)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer st.Close()
	if err := storepg.Migrate(ctx, st.Pool()); err != nil {
		return err
	}
	fmt.Println("migrations applied")
	return nil
}
