package storepg_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// TestSucceededWritesItsEvent: since migration 0029 the jobs_announce
// trigger announces a job's every move into an announced status but one,
// an update to succeeded, which the statement making it writes itself, for
// its whole batch at once (docs/architecture.md, "Events"). So that no
// statement can forget one, every statement of the store that updates a
// job's status is classified here: it writes its outbox event (INSERT INTO
// outbox), or it is listed with why the status it sets is never succeeded.
// A new statement that sets a job's status fails this test until it is one
// or the other.
func TestSucceededWritesItsEvent(t *testing.T) {
	neverSucceeded := map[string]string{
		"JobClaim":          "sets running",
		"JobTransition":     "a worker's transitions (store.WorkerTransition), succeeded not among them",
		"JobSettle":         "ResolveJob and ApproveJob: queued, failed or cancelled (store.JobResolveParams.Write, JobApproveParams.Write)",
		"JobCancel":         "running or cancelled",
		"JobReplay":         "sets queued",
		"RunReplayFailures": "sets queued",
		"RunCancelJobs":     "running or cancelled",
	}
	allowed, _ := store.WorkerTransition(store.JobStatusSucceeded)
	require.False(t, allowed, "JobTransition's statuses now include succeeded: it must write its outbox event")
	_, err := (&store.JobResolveParams{To: store.JobStatusSucceeded}).Write()
	require.Error(t, err, "ResolveJob now settles to succeeded: JobSettle must write its outbox event")

	files, err := filepath.Glob(filepath.Join("internal", "dbsqlc", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	updatesJobs := regexp.MustCompile(`\bUPDATE\s+jobs\b`)
	setsStatus := regexp.MustCompile(`(?m)^\s*(SET\s+)?status\s*=`) // an assignment, not a WHERE's condition
	var writers, seen []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, q := range strings.Split(string(b), "-- name: ")[1:] {
			name := strings.Fields(q)[0]
			if !updatesJobs.MatchString(q) || !setsStatus.MatchString(q) {
				continue
			}
			seen = append(seen, name)
			if strings.Contains(q, "INSERT INTO outbox") {
				writers = append(writers, name)
				continue
			}
			_, ok := neverSucceeded[name]
			require.True(t, ok, "%s (%s) updates a job's status and writes no outbox event: write it (as JobPublishMany does) or list it with why it never sets succeeded", name, f)
		}
	}
	sort.Strings(writers)
	require.Equal(t, []string{"JobPublishMany", "JobUpdateFull"}, writers)
	for name := range neverSucceeded {
		require.Contains(t, seen, name, "%s is listed but sets no status any more: take it out", name)
	}
}
