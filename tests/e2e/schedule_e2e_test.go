package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// The schedule test's timing. The property is about the ratio of job length
// to period (2.5), not the absolute times, so the 1s period, 2.5s
// jobs and 20s are scaled down by two: 500ms, 1250ms, 10s.
const (
	schedulePeriod   = 500 * time.Millisecond
	scheduleJobTime  = 1250 * time.Millisecond
	scheduleSkipFor  = 10 * time.Second
	scheduleAllowFor = 5 * time.Second
)

type scheduleCluster struct {
	dbURL   string
	args    func(i int) []string
	servers []*proc
	conn    *pgx.Conn
	client  *clientsdk.Client // every replica: a killed one is left for another
}

func newScheduleCluster(t *testing.T) *scheduleCluster {
	t.Helper()
	c := &scheduleCluster{dbURL: storepgtest.NewMigratedSchemaURL(t)}
	sim := startSim(t)
	sim.setFaults(t, fmt.Sprintf(`{"latency": %q}`, scheduleJobTime.String()))
	pipes := writeFile(t, "pipelines.yaml", lightPipelines)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	c.args = func(i int) []string {
		return []string{
			"serve", "--database-url", c.dbURL, "--migrate", "--grpc-addr", addrs[i], "--pipelines", pipes,
			"--llm-base-url", sim.base + "/v1", "--llm-lookup-path", llmsim.LookupPath, "--relays", "0",
			"--workers", "4", "--lease-duration", "1s", "--poll-interval", "20ms",
			"--schedule-lease", "1s", "--schedule-poll-interval", "50ms", "--log-level", "debug",
		}
	}
	first := start(t, "serve-0", nil, c.args(0)...) // migrates before the others start
	waitHealthy(t, first, addrs[0])
	c.servers = []*proc{first, start(t, "serve-1", nil, c.args(1)...), start(t, "serve-2", nil, c.args(2)...)}
	waitHealthy(t, c.servers[1], addrs[1])
	waitHealthy(t, c.servers[2], addrs[2])
	var err error
	c.client, err = clientsdk.Dial(strings.Join(addrs, ","))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.client.Close() })
	c.conn, err = pgx.Connect(context.Background(), c.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.conn.Close(context.Background()) })
	return c
}

func (c *scheduleCluster) create(t *testing.T, name string, overlap oncejobv1.OverlapPolicy) string {
	t.Helper()
	sch, err := c.client.CreateSchedule(context.Background(), &oncejobv1.CreateScheduleRequest{
		Name: name, Spec: &oncejobv1.CreateScheduleRequest_Interval{Interval: durationpb.New(schedulePeriod)},
		Job: &oncejobv1.SubmitJobRequest{Pipeline: "light", Document: &oncejobv1.Document{
			Content: &oncejobv1.Document_Text{Text: "the report of " + name}}},
		Overlap: overlap,
	}, clientsdk.WithIdempotencyKey("schedule-"+name))
	require.NoError(t, err)
	return sch.GetId()
}

// killHolder SIGKILLs the server holding the schedule's lease (its owner
// name carries its pid) and returns its index.
func (c *scheduleCluster) killHolder(t *testing.T, id string) int {
	t.Helper()
	var owner string
	require.Eventually(t, func() bool {
		err := c.conn.QueryRow(context.Background(), `SELECT coalesce(lease_owner, '') FROM schedules WHERE id = $1`, id).Scan(&owner)
		require.NoError(t, err)
		return owner != ""
	}, 60*time.Second, 20*time.Millisecond)
	parts := strings.Split(owner, "-")
	pid, err := strconv.Atoi(parts[len(parts)-2])
	require.NoError(t, err, "owner %q", owner)
	for i, s := range c.servers {
		if s.cmd.Process.Pid == pid && !s.done() {
			s.signal(syscall.SIGKILL)
			<-s.exited
			t.Logf("SIGKILLed serve-%d, the holder of schedule %s", i, id)
			return i
		}
	}
	t.Fatalf("no live server has pid %d (owner %q)", pid, owner)
	return -1
}

func (c *scheduleCluster) pause(t *testing.T, id string) {
	t.Helper()
	_, err := c.client.PauseSchedule(context.Background(), id)
	require.NoError(t, err)
}

type slotRow struct {
	at      time.Time
	outcome string
	jobID   string
	reason  string
}

func (c *scheduleCluster) slots(t *testing.T, id string) []slotRow {
	t.Helper()
	rows, err := c.conn.Query(context.Background(), `SELECT slot_at, outcome, coalesce(job_id::text, ''), reason FROM schedule_slots WHERE schedule_id = $1 ORDER BY slot_at`, id)
	require.NoError(t, err)
	defer rows.Close()
	var out []slotRow
	for rows.Next() {
		var s slotRow
		require.NoError(t, rows.Scan(&s.at, &s.outcome, &s.jobID, &s.reason))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

type jobSpan struct {
	id, key    string
	start, end time.Time
	status     string
}

// jobs are the schedule's jobs, each with the span it ran in: from its
// first claim to its terminal event, by the database's clock.
func (c *scheduleCluster) jobs(t *testing.T, id string) []jobSpan {
	t.Helper()
	rows, err := c.conn.Query(context.Background(), `
		SELECT jobs.id::text, jobs.idempotency_key, jobs.status,
			min(e.created_at) FILTER (WHERE e.status = 'running'),
			max(e.created_at) FILTER (WHERE e.status IN ('succeeded', 'failed', 'dead_lettered', 'cancelled'))
		FROM jobs JOIN job_events e ON e.job_id = jobs.id
		WHERE jobs.labels->>'oncejob.schedule' = $1
		GROUP BY jobs.id ORDER BY 4`, id)
	require.NoError(t, err)
	defer rows.Close()
	var out []jobSpan
	for rows.Next() {
		var j jobSpan
		var start, end *time.Time
		require.NoError(t, rows.Scan(&j.id, &j.key, &j.status, &start, &end))
		require.NotNil(t, start, "job %s never ran", j.id)
		require.NotNil(t, end, "job %s never ended", j.id)
		j.start, j.end = *start, *end
		out = append(out, j)
	}
	require.NoError(t, rows.Err())
	return out
}

// waitJobsEnd waits until every job of the schedule is terminal (polls
// the database another process writes).
func (c *scheduleCluster) waitJobsEnd(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var open int
		err := c.conn.QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE labels->>'oncejob.schedule' = $1
			AND status NOT IN ('succeeded', 'failed', 'dead_lettered', 'cancelled')`, id).Scan(&open)
		require.NoError(t, err)
		return open == 0
	}, 60*time.Second, 50*time.Millisecond)
}

// requireFiredOnce: every fired slot names a job with the slot's key, no
// job belongs to two slots, and every job of the schedule is a fired
// slot's.
func requireFiredOnce(t *testing.T, id string, slots []slotRow, jobs []jobSpan) int {
	t.Helper()
	byJob := map[string]time.Time{}
	fired := 0
	for _, s := range slots {
		if s.outcome != "fired" {
			continue
		}
		fired++
		require.NotEmpty(t, s.jobID)
		_, dup := byJob[s.jobID]
		require.False(t, dup, "job %s fired for two slots", s.jobID)
		byJob[s.jobID] = s.at
	}
	require.Len(t, jobs, fired, "one job per fired slot, no other")
	for _, j := range jobs {
		at, ok := byJob[j.id]
		require.True(t, ok, "job %s is no fired slot's", j.id)
		require.Equal(t, "schedule:"+id+":"+at.UTC().Format(time.RFC3339Nano), j.key)
		require.Equal(t, "succeeded", j.status)
	}
	return fired
}

// TestScheduleThreeServers: three servers on one Postgres fire a schedule
// every 500ms whose job takes 1250ms; the server holding the schedule is
// SIGKILLed midway. With SKIP: at no instant do two of its jobs run, each
// slot fired at most once, and the skipped slots are recorded with the job
// they waited for. With ALLOW: exactly one job per slot, through a kill of
// the holder too.
func TestScheduleThreeServers(t *testing.T) {
	t.Parallel()
	c := newScheduleCluster(t)

	skip := c.create(t, "skip", oncejobv1.OverlapPolicy_OVERLAP_POLICY_SKIP)
	time.Sleep(scheduleSkipFor / 2) // the schedule runs in other processes: the point is wall time
	killed := c.killHolder(t, skip)
	time.Sleep(scheduleSkipFor / 2)
	c.pause(t, skip)
	c.waitJobsEnd(t, skip)

	slots, jobs := c.slots(t, skip), c.jobs(t, skip)
	fired := requireFiredOnce(t, skip, slots, jobs)
	sort.Slice(jobs, func(i, k int) bool { return jobs[i].start.Before(jobs[k].start) })
	for i := 1; i < len(jobs); i++ {
		require.False(t, jobs[i].start.Before(jobs[i-1].end),
			"jobs %s (%s-%s) and %s (from %s) of a SKIP schedule ran at once", jobs[i-1].id, jobs[i-1].start, jobs[i-1].end, jobs[i].id, jobs[i].start)
	}
	skipped := 0
	for _, s := range slots {
		if s.outcome == "skipped" {
			skipped++
			require.Contains(t, s.reason, "still running")
			require.NotEmpty(t, s.jobID, "a skipped slot names the job it waited for")
		}
	}
	t.Logf("SKIP: %d slots decided, %d fired, %d skipped", len(slots), fired, skipped)
	require.GreaterOrEqual(t, fired, 3)
	require.Positive(t, skipped)

	c.servers[killed] = start(t, fmt.Sprintf("serve-%d-again", killed), nil, c.args(killed)...)
	allow := c.create(t, "allow", oncejobv1.OverlapPolicy_OVERLAP_POLICY_ALLOW)
	time.Sleep(scheduleAllowFor / 2) // wall time, as above
	c.killHolder(t, allow)
	time.Sleep(scheduleAllowFor / 2)
	c.pause(t, allow)
	c.waitJobsEnd(t, allow)

	slots, jobs = c.slots(t, allow), c.jobs(t, allow)
	fired = requireFiredOnce(t, allow, slots, jobs)
	require.Len(t, slots, fired, "ALLOW: every slot fired")
	for i := 1; i < len(slots); i++ {
		require.Equal(t, schedulePeriod, slots[i].at.Sub(slots[i-1].at), "no slot left out between %s and %s", slots[i-1].at, slots[i].at)
	}
	overlapping := 0
	sort.Slice(jobs, func(i, k int) bool { return jobs[i].start.Before(jobs[k].start) })
	for i := 1; i < len(jobs); i++ {
		if jobs[i].start.Before(jobs[i-1].end) {
			overlapping++
		}
	}
	t.Logf("ALLOW: %d slots, each fired once; %d jobs started while the one before ran", fired, overlapping)
	// Slots a loaded machine decides after the pause are never decided: the
	// count is a floor, the contiguity above is the property.
	require.GreaterOrEqual(t, fired, 4)
	require.Positive(t, overlapping, "ALLOW lets jobs overlap")
}
