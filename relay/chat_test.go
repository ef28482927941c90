package relay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestChatWindow measures the check-then-act's remaining window: the time
// from the chat's answer to the sent_messages row committed. A crash inside
// it posts the message again on the retry (tests/e2e's
// TestRelayKillAtChatWindow shows that happen); outside it, a retry finds
// the row and posts nothing. The figures are logged, and recorded in
// docs/architecture.md ("Chat sink"); nothing here asserts a duration.
func TestChatWindow(t *testing.T) {
	t.Parallel()
	st := storepgtest.NewTestStore(t)
	var mu sync.Mutex
	posts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		posts[body.Text]++
		n := len(posts)
		mu.Unlock()
		fmt.Fprintf(w, `{"ok": true, "ts": "1700000000.%06d"}`, n)
	}))
	t.Cleanup(srv.Close)
	urlFile := filepath.Join(t.TempDir(), "chat-url")
	require.NoError(t, os.WriteFile(urlFile, []byte(srv.URL), 0o600))
	sink, err := newChatSink("ops", &ChatConfig{URL: Secret{File: urlFile}, AllowPrivateNetwork: true}, st)
	require.NoError(t, err)
	var windows []time.Duration
	sink.recorded = func(d time.Duration) { windows = append(windows, d) }

	const messages = 200
	for i := range messages {
		d := chatDelivery(i)
		res := sink.Deliver(t.Context(), d)
		require.Equal(t, store.DeliveryOutcomeDelivered, res.Outcome, "%v", res.Err)
		require.False(t, res.Duplicate)
		again := sink.Deliver(t.Context(), d) // a retry after the record: no second post
		require.Equal(t, store.DeliveryOutcomeDelivered, again.Outcome)
		require.True(t, again.Duplicate)
		require.Equal(t, res.ExternalRef, again.ExternalRef)
	}
	require.Len(t, posts, messages)
	for text, n := range posts {
		require.Equal(t, 1, n, "posted %d times: %s", n, text)
	}
	require.Len(t, windows, messages)
	slices.Sort(windows)
	t.Logf("chat check-then-act window (answer -> sent_messages committed), %d posts on Postgres: p50 %s, p99 %s, max %s",
		messages, windows[messages/2], windows[messages*99/100], windows[messages-1])
}

func chatDelivery(i int) *store.Delivery {
	jobID := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
	id := "job:" + jobID + ":job.dead_lettered:0"
	payload := fmt.Sprintf(`{"version": 1, "type": "job.dead_lettered", "id": %q, "time": "2026-12-03T00:00:00.000000Z",
		"data": {"job_id": %q, "tenant": "acme", "pipeline": "summarize", "pipeline_version": 1, "status": "dead_lettered",
			"error": {"code": "BUDGET_SPENT", "message": "attempts spent: 5 of 5"}}}`, id, jobID)
	return &store.Delivery{ID: int64(i + 1), EventID: id, EventType: "job.dead_lettered", Sink: "ops", Tenant: "acme", JobID: jobID, Payload: []byte(payload)}
}

// TestChatText names the job, its pipeline, the last error and the command.
func TestChatText(t *testing.T) {
	t.Parallel()
	text, err := chatText(chatDelivery(7))
	require.NoError(t, err)
	require.Contains(t, text, "00000000-0000-0000-0000-000000000007")
	require.Contains(t, text, "pipeline summarize")
	require.Contains(t, text, "BUDGET_SPENT: attempts spent: 5 of 5")
	require.Contains(t, text, "oncejob replay 00000000-0000-0000-0000-000000000007")
}
