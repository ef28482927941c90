package storesqlite_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/migrations"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
	"github.com/oncejob/oncejob/store/storetest"
)

// childDataDirEnv makes the test binary a child process for
// TestKilledProcess: it submits jobs to the store in that directory until it
// is killed.
const childDataDirEnv = "ONCEJOB_STORESQLITE_TEST_CHILD_DATA_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDataDirEnv); dir != "" {
		submitUntilKilled(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) storetest.Store {
		return openTestStore(t, t.TempDir())
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("SecondOpenOfADataDirectoryFailsUntilClose", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()

		first, err := storesqlite.Open(t.Context(), storesqlite.Config{DataDir: dir})
		require.NoError(t, err)

		_, err = storesqlite.Open(t.Context(), storesqlite.Config{DataDir: dir})
		require.EqualError(t, err, fmt.Sprintf(
			"store/storesqlite: data directory %s is in use by another oncejob process (lock %s)",
			dir, filepath.Join(dir, "oncejob.lock")))

		first.Close()
		second, err := storesqlite.Open(t.Context(), storesqlite.Config{DataDir: dir})
		require.NoError(t, err)
		second.Close()
	})

	t.Run("CreatesAMissingDataDirectory", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "a", "b")

		s := openTestStore(t, dir)
		_, err := s.JobList(t.Context(), &store.JobListParams{Tenant: "tenant-a"})
		require.NoError(t, err)
		require.FileExists(t, filepath.Join(dir, "oncejob.db"))
	})

	t.Run("DataDirIsRequired", func(t *testing.T) {
		t.Parallel()

		_, err := storesqlite.Open(t.Context(), storesqlite.Config{})
		require.ErrorContains(t, err, "DataDir is required")
	})

	t.Run("DataSurvivesCloseAndReopen", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		dir := t.TempDir()

		s, err := storesqlite.Open(ctx, storesqlite.Config{DataDir: dir})
		require.NoError(t, err)
		params := newSubmitParams("11111111-2222-4333-8444-555555555555")
		created, err := s.JobSubmit(ctx, params)
		require.NoError(t, err)
		done, err := storetest.Complete(ctx, s, &storetest.CompleteParams{Tenant: params.Tenant, ID: params.ID, Output: []byte(`{"ok":true}`)})
		require.NoError(t, err)
		s.Close()

		// Reopening re-runs no migration and finds the job, its events and
		// its idempotency key.
		s = openTestStore(t, dir)
		got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: params.Tenant, ID: params.ID})
		require.NoError(t, err)
		require.Equal(t, done, got)
		events, err := s.JobEventList(ctx, &store.JobEventListParams{Tenant: params.Tenant, JobID: params.ID})
		require.NoError(t, err)
		require.Len(t, events, 2)

		replay := *params
		replay.ID = "66666666-7777-4888-8999-000000000000"
		again, err := s.JobSubmit(ctx, &replay)
		require.NoError(t, err)
		require.Equal(t, store.OutcomeExisting, again.Outcome)
		require.Equal(t, created.Job.ID, again.Job.ID)
	})

	t.Run("AppliesEachMigrationOnce", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		openTestStore(t, dir).Close()
		openTestStore(t, dir)

		all, err := migrations.SQLite()
		require.NoError(t, err)
		db, err := sql.Open("sqlite", filepath.Join(dir, "oncejob.db"))
		require.NoError(t, err)
		defer db.Close()
		var applied, latest int
		require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&applied, &latest))
		require.Equal(t, len(all), applied)
		require.Equal(t, all[len(all)-1].Version, latest)
	})

	t.Run("RefusesADataDirectoryANewerBinaryMigrated", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		openTestStore(t, dir).Close()
		db, err := sql.Open("sqlite", filepath.Join(dir, "oncejob.db"))
		require.NoError(t, err)
		_, err = db.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`)
		require.NoError(t, err)
		require.NoError(t, db.Close())

		_, err = storesqlite.Open(t.Context(), storesqlite.Config{DataDir: dir})
		var schemaErr *migrations.SchemaError
		require.ErrorAs(t, err, &schemaErr)
		require.Equal(t, []int{9999}, schemaErr.Unknown)
		require.ErrorContains(t, err, "schema is ahead of this binary")
	})

	t.Run("IDsAreMatchedInAnyFormPostgresAccepts", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := openTestStore(t, t.TempDir())

		params := newSubmitParams("AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE")
		res, err := s.JobSubmit(ctx, params)
		require.NoError(t, err)
		require.Equal(t, "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", res.Job.ID)

		for _, id := range []string{"aaaaaaaabbbb4ccc8dddeeeeeeeeeeee", "{AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE}"} {
			got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: params.Tenant, ID: id})
			require.NoError(t, err, "id %q", id)
			require.Equal(t, res.Job.ID, got.ID)
		}
	})
}

// TestKilledProcess kills (SIGKILL) a process in the middle of submitting
// jobs: every job it was told was accepted is there when the data directory
// is opened again, and the dead process's lock is gone.
func TestKilledProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDataDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	const accepted = 50
	var ids []string
	lines := bufio.NewScanner(stdout)
	for len(ids) < accepted && lines.Scan() {
		ids = append(ids, lines.Text())
	}
	require.NoError(t, cmd.Process.Kill())
	require.Error(t, cmd.Wait())
	require.Len(t, ids, accepted, "the child stopped early")

	s := openTestStore(t, dir)
	for _, id := range ids {
		_, err := s.JobGetByID(t.Context(), &store.JobGetByIDParams{Tenant: "tenant-a", ID: id})
		require.NoError(t, err, "accepted job %s", id)
	}
}

// submitUntilKilled is the child of TestKilledProcess. It prints the id of
// each job once JobSubmit has returned it.
func submitUntilKilled(dir string) {
	ctx := context.Background()
	s, err := storesqlite.Open(ctx, storesqlite.Config{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for {
		res, err := s.JobSubmit(ctx, newSubmitParams(uuid.NewString()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(res.Job.ID)
	}
}

func TestMigrationsMatchPostgres(t *testing.T) {
	t.Parallel()

	names := func(all []migrations.Migration, err error) []string {
		require.NoError(t, err)
		names := make([]string, len(all))
		for i, m := range all {
			names[i] = m.Name
		}
		return names
	}
	require.Equal(t, names(migrations.Postgres()), names(migrations.SQLite()))
}

func openTestStore(t *testing.T, dir string) *storesqlite.Store {
	t.Helper()
	return storesqlitetest.Open(t, dir)
}

func newSubmitParams(id string) *store.JobSubmitParams {
	document := []byte("invoice " + id)
	sum := sha256.Sum256(document)
	return &store.JobSubmitParams{
		ID:              id,
		Tenant:          "tenant-a",
		Method:          "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey:  "key-" + id,
		Fingerprint:     "fp-" + id,
		DedupKey:        "dedup:v1:" + id,
		Pipeline:        "invoice",
		PipelineVersion: 1,
		Document:        document,
		DocumentSHA256:  hex.EncodeToString(sum[:]),
		DocumentMedia:   "text/plain",
		Params:          []byte(`{}`),
	}
}
