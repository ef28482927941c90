package storepg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// A statement Postgres refuses for a value it was given is the caller's bad
// input (store.ErrInvalidRow), never an outage: the same statement fails
// again, so nothing should retry it.
func TestValueErrorsAreInvalidRow(t *testing.T) {
	t.Parallel()
	st := storepgtest.NewTestStore(t)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"a cursor id that is no uuid": func() error {
			_, err := st.JobList(ctx, &store.JobListParams{Tenant: "acme", After: &store.JobCursor{CreatedAt: time.Now(), ID: "not-a-uuid"}})
			return err
		},
		"NUL in text (22021)": func() error {
			_, err := st.JobList(ctx, &store.JobListParams{Tenant: "acme", Pipeline: "summ\x00"})
			return err
		},
	} {
		err := call()
		require.ErrorIs(t, err, store.ErrInvalidRow, name)
		require.NotErrorIs(t, err, store.ErrUnavailable, name)
	}
}
