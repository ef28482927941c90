// Command receiver is a runnable example of an apply-once webhook receiver
// for oncejob's relay (clientsdk/receiver). Its effect is a row in
// receiver_effects per event it applies - deliberately without a unique key
// of its own, so that only the inbox keeps a second delivery from applying
// twice, and a test can count.
//
//	WEBHOOK_SECRETS=whsec_... go run ./examples/receiver --addr 127.0.0.1:8080 \
//	    --database-url postgres://postgres@127.0.0.1:5432/postgres
//	WEBHOOK_SECRETS=whsec_... go run ./examples/receiver --sqlite ./receiver.db
//
// WEBHOOK_SECRETS holds the sink's secret, or the new and the old one
// separated by a space while a secret rotates.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/oncejob/oncejob/clientsdk/receiver"
)

const effectsTable = `CREATE TABLE IF NOT EXISTS receiver_effects (
	id          INTEGER PRIMARY KEY %s,
	event_id    TEXT NOT NULL,
	event_type  TEXT NOT NULL,
	job_id      TEXT NOT NULL,
	status      TEXT NOT NULL,
	applied_at  TEXT NOT NULL
)`

const insertEffect = `INSERT INTO receiver_effects (event_id, event_type, job_id, status, applied_at)
VALUES ($1, $2, $3, $4, $5) RETURNING id`

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	databaseURL := flag.String("database-url", "", "Postgres URL of the receiver's own database")
	sqlitePath := flag.String("sqlite", "", "SQLite file of the receiver's own database, when no --database-url")
	flag.Parse()
	if err := run(*addr, *databaseURL, *sqlitePath); err != nil {
		log.Fatal(err)
	}
}

func run(addr, databaseURL, sqlitePath string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	verifier, err := receiver.NewVerifier(strings.Fields(os.Getenv("WEBHOOK_SECRETS"))...)
	if err != nil {
		return fmt.Errorf("WEBHOOK_SECRETS: %w", err)
	}
	inbox, err := openInbox(ctx, databaseURL, sqlitePath)
	if err != nil {
		return err
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "receiver listening on %s\n", lis.Addr())
	srv := &http.Server{Handler: receiver.NewHandler(verifier, inbox), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openInbox opens the receiver's database and its inbox: Postgres through
// pgx, SQLite through database/sql.
func openInbox(ctx context.Context, databaseURL, sqlitePath string) (receiver.Applier, error) {
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	if databaseURL != "" {
		pool, err := pgxpool.New(ctx, databaseURL)
		if err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, fmt.Sprintf(effectsTable, "GENERATED ALWAYS AS IDENTITY")); err != nil {
			return nil, err
		}
		inbox, err := receiver.NewPgxInbox(pool, "", func(ctx context.Context, tx pgx.Tx, e *receiver.Event) (string, error) {
			var id int64
			err := tx.QueryRow(ctx, insertEffect, e.ID, e.Type, e.Data.JobID, e.Data.Status, now()).Scan(&id)
			return "effect-" + strconv.FormatInt(id, 10), err
		})
		if err != nil {
			return nil, err
		}
		return inbox, inbox.CreateTable(ctx)
	}
	if sqlitePath == "" {
		return nil, errors.New("set --database-url or --sqlite")
	}
	db, err := sql.Open("sqlite", "file:"+sqlitePath+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, fmt.Sprintf(effectsTable, "AUTOINCREMENT")); err != nil {
		return nil, err
	}
	inbox, err := receiver.NewSQLInbox(db, "sqlite", "", func(ctx context.Context, tx *sql.Tx, e *receiver.Event) (string, error) {
		var id int64
		err := tx.QueryRowContext(ctx, insertEffect, e.ID, e.Type, e.Data.JobID, e.Data.Status, now()).Scan(&id)
		return "effect-" + strconv.FormatInt(id, 10), err
	})
	if err != nil {
		return nil, err
	}
	return inbox, inbox.CreateTable(ctx)
}
