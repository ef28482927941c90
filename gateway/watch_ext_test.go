package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	id, event, data string
}

// sseStream reads an event stream the way EventSource does: fields by
// line, comments ignored, an event dispatched at each blank line that
// follows data, the last id kept for Last-Event-ID.
type sseStream struct {
	resp     *http.Response
	r        *bufio.Reader
	lastID   string
	comments int
	cancel   context.CancelFunc
}

// openSSE opens an event stream (Last-Event-ID when lastID is set) and
// requires 200 text/event-stream.
func openSSE(t *testing.T, url, apiKey, lastID string) *sseStream {
	t.Helper()
	// A change is sent once no older transaction is open anywhere on the
	// (shared) Postgres server, so allow for slow neighbours; never hang.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", bearer(apiKey))
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	s := &sseStream{resp: resp, r: bufio.NewReader(resp.Body), lastID: lastID, cancel: cancel}
	t.Cleanup(s.close)
	return s
}

// next returns the next event, or an error when the stream ends.
func (s *sseStream) next() (sseEvent, error) {
	var e sseEvent
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return e, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if data == nil {
				e = sseEvent{}
				continue // a retry or comment block: nothing to dispatch
			}
			e.data = strings.Join(data, "\n")
			if e.event == "" {
				e.event = "message"
			}
			return e, nil
		}
		if strings.HasPrefix(line, ":") {
			s.comments++
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			e.id, s.lastID = value, value
		case "event":
			e.event = value
		case "data":
			data = append(data, value)
		}
	}
}

// close cuts the connection, as a network failure or a closed tab would.
func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

type watchedEvent struct {
	JobID  string `json:"job_id"`
	Seq    int32  `json:"seq"`
	Status string `json:"status"`
}

func eventOf(t *testing.T, data string) watchedEvent {
	t.Helper()
	var m struct {
		Event watchedEvent `json:"event"`
	}
	require.NoError(t, json.Unmarshal([]byte(data), &m), "data %s", data)
	return m.Event
}

func submitHTTP(t *testing.T, b *testBundle, apiKey, text string) string {
	t.Helper()
	body := fmt.Sprintf(`{"pipeline": "summarize", "document": {"text": %q}}`, text)
	r := goClient{}.do(t, "POST", b.base+"/v1/jobs", map[string]string{"Authorization": bearer(apiKey), "Idempotency-Key": uuid.NewString()}, []byte(body))
	require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
	return decode(t, r)["job"].(map[string]any)["id"].(string)
}

// A job watch cut mid-job and reconnected with Last-Event-ID delivers every
// event once, in order, and ends with the terminal one.
func TestWatchJobSSEResumesWithLastEventID(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		id := submitHTTP(t, b, keyAcme, "watch me over SSE")
		url := b.base + "/v1/jobs/" + id + ":watch"

		var got []watchedEvent
		s := openSSE(t, url, keyAcme, "")
		progressed := make(chan int, 8)
		done := make(chan struct{})
		go func() {
			defer close(done)
			// The job moves while the watch reads: each transition waits
			// until the test has seen the one before, or was cut off.
			drive(t, b.store, 1, func(seq int) {
				select {
				case <-progressed:
				case <-time.After(10 * time.Second):
				}
			})
		}()
		progressed <- 1
		for len(got) < 3 {
			e, err := s.next()
			require.NoError(t, err)
			require.Equal(t, "message", e.event)
			ev := eventOf(t, e.data)
			require.Equal(t, strconv.Itoa(int(ev.Seq)), e.id, "the SSE id is the seq")
			got = append(got, ev)
			progressed <- len(got)
		}
		s.close() // cut mid-job, as a dropped connection would

		// Some transitions happen while nobody watches: a pause lets them
		// run before the reconnect (the checks hold whether they did or not).
		progressed <- 0
		progressed <- 0
		time.Sleep(50 * time.Millisecond)

		s = openSSE(t, url, keyAcme, s.lastID)
		for {
			e, err := s.next()
			require.NoError(t, err)
			if e.event == "end" {
				break
			}
			require.Equal(t, "message", e.event)
			got = append(got, eventOf(t, e.data))
			select {
			case progressed <- len(got):
			default:
			}
		}
		<-done
		_, err := s.next()
		require.ErrorIs(t, err, io.EOF, "the stream closes after end")

		require.Len(t, got, 7, "every event once: %+v", got)
		for i, e := range got {
			require.Equal(t, id, e.JobID)
			require.Equal(t, int32(i+1), e.Seq, "in order, no gap, no repeat: %+v", got)
		}
		require.Equal(t, "JOB_STATUS_SUCCEEDED", got[6].Status)

		// Reconnecting after the end: nothing more, the end again.
		s = openSSE(t, url, keyAcme, "7")
		e, err := s.next()
		require.NoError(t, err)
		require.Equal(t, "end", e.event)
	})
}

// A tenant watch cut many times and resumed each time from its
// Last-Event-ID (the cursor) sees every change of the tenant once, in the
// order of a watch that was never cut, and nothing of another tenant.
func TestWatchJobsSSEResumesWithLastEventID(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		const jobs = 4
		acme := map[string]bool{}
		for i := range jobs {
			acme[submitHTTP(t, b, keyAcme, fmt.Sprintf("tenant watch %d", i))] = true
		}
		submitHTTP(t, b, keyGlobex, "another tenant's job")
		url := b.base + "/v1/jobs:watch"

		type key struct {
			job string
			seq int32
		}
		// The reference: a watch never cut.
		whole := openSSE(t, url, keyAcme, "")
		done := make(chan struct{})
		go func() {
			defer close(done)
			// A pause between transitions, so the cuts below fall between
			// them as well as in bursts; the checks hold for any spacing.
			drive(t, b.store, jobs+1, func(int) { time.Sleep(20 * time.Millisecond) })
		}()

		var got []key
		seen := map[key]bool{}
		last := ""
		for len(got) < jobs*7 {
			s := openSSE(t, url, keyAcme, last)
			for range 3 { // a few changes per connection, then cut
				e, err := s.next()
				require.NoError(t, err)
				require.Equal(t, "message", e.event)
				ev := eventOf(t, e.data)
				require.True(t, acme[ev.JobID], "a change of another tenant's job: %+v", ev)
				k := key{ev.JobID, ev.Seq}
				require.False(t, seen[k], "change %+v twice", k)
				seen[k] = true
				got = append(got, k)
				if len(got) == jobs*7 {
					break
				}
			}
			last = s.lastID
			s.close()
		}
		<-done

		var want []key
		for len(want) < jobs*7 {
			e, err := whole.next()
			require.NoError(t, err)
			ev := eventOf(t, e.data)
			want = append(want, key{ev.JobID, ev.Seq})
		}
		require.Equal(t, want, got, "the resumed watch is the uncut watch")
	})
}

// Without Accept: text/event-stream, a watch is newline-delimited JSON in
// grpc-gateway's stream format; quiet streams carry heartbeats.
func TestWatchNDJSONAndHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{heartbeat: 50 * time.Millisecond})
	id := submitHTTP(t, b, keyAcme, "ndjson")

	req, err := http.NewRequest("GET", b.base+"/v1/jobs/"+id+":watch", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", bearer(keyAcme))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	var first struct {
		Result struct {
			Event watchedEvent `json:"event"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &first))
	require.Equal(t, int32(1), first.Result.Event.Seq)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "\n", line, "a heartbeat while the job waits")

	// SSE heartbeats are comments, after the reconnection hint.
	sse := openSSE(t, b.base+"/v1/jobs:watch?pipeline=nothing-ever", keyAcme, "")
	var lines []string
	for range 4 {
		line, err := sse.r.ReadString('\n')
		require.NoError(t, err)
		lines = append(lines, line)
	}
	require.Equal(t, []string{"retry: 1000\n", "\n", ": heartbeat\n", "\n"}, lines)
}

// A watch that cannot start is an HTTP error with a problem, not a stream.
func TestWatchErrorsBeforeTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	id := submitHTTP(t, b, keyAcme, "errors")
	c := goClient{}
	sse := func(k string, extra map[string]string) map[string]string {
		h := map[string]string{"Accept": "text/event-stream", "Authorization": bearer(k)}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs/"+id+":watch", sse(keyGlobex, nil), nil), http.StatusNotFound, "")
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs/"+id+":watch", sse("nobody", nil), nil), http.StatusUnauthorized, "")
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs/"+id+":watch", sse(keyAcme, map[string]string{"Last-Event-ID": "x"}), nil), http.StatusBadRequest, "")
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs/"+id+":watch", sse(keyAcme, map[string]string{"Last-Event-ID": "9"}), nil), http.StatusBadRequest, "")
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs/not-a-uuid:watch", sse(keyAcme, nil), nil), http.StatusBadRequest, "")
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs:watch", sse(keyAcme, map[string]string{"Last-Event-ID": "not-a-cursor"}), nil), http.StatusBadRequest, "")
	requireProblem(t, c.do(t, "GET", b.base+"/v1/jobs:watch?status=JOB_STATUS_NOPE", sse(keyAcme, nil), nil), http.StatusBadRequest, "")
}

// When the server shuts down, a watch ends with a problem event that says
// where to resume; an EventSource reconnects with its Last-Event-ID.
func TestWatchShutdownSaysWhereToResume(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	submitHTTP(t, b, keyAcme, "shutdown")
	s := openSSE(t, b.base+"/v1/jobs:watch", keyAcme, "")
	first, err := s.next()
	require.NoError(t, err)
	b.hub.Shutdown()
	e, err := s.next()
	require.NoError(t, err)
	require.Equal(t, "problem", e.event)
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.data), &p))
	require.Equal(t, "SERVER_SHUTTING_DOWN", p["reason"])
	require.EqualValues(t, 503, p["status"])
	require.Equal(t, first.id, p["metadata"].(map[string]any)["after_cursor"])
	_, err = s.next()
	require.ErrorIs(t, err, io.EOF)
}

// TestWatchJobSSEAnySpellingOfTheID (issue #31, finding 9): an SSE watch
// whose URL names the job in upper case or without dashes gets every
// event, live ones included, and the end. Before, it got the backlog and
// then nothing.
func TestWatchJobSSEAnySpellingOfTheID(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		id := submitHTTP(t, b, keyAcme, "watch me spelled otherwise")
		var streams []*sseStream
		for _, spelled := range []string{strings.ToUpper(id), strings.ReplaceAll(id, "-", "")} {
			s := openSSE(t, b.base+"/v1/jobs/"+spelled+":watch", keyAcme, "")
			e, err := s.next()
			require.NoError(t, err)
			require.Equal(t, int32(1), eventOf(t, e.data).Seq, "the backlog")
			streams = append(streams, s)
		}
		drive(t, b.store, 1, func(int) {})
		for _, s := range streams {
			var got []watchedEvent
			for {
				e, err := s.next()
				require.NoError(t, err, "got %+v", got)
				if e.event == "end" {
					break
				}
				got = append(got, eventOf(t, e.data))
			}
			require.Len(t, got, 6, "seqs 2-7, live: %+v", got)
			for i, e := range got {
				require.Equal(t, id, e.JobID)
				require.Equal(t, int32(i+2), e.Seq)
			}
		}
	})
}
