package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// ssePhase is watchPhase over HTTP: watchers EventSource-style clients,
// each on a connection of its own (as browsers' EventSource over HTTP/1.1),
// each a GET /v1/jobs/{id}:watch with Accept: text/event-stream, read as a
// browser reads it. Same jobs, same rounds, same commit-to-receipt clock.
func (e *env) ssePhase(ctx context.Context, watchers int) (result, error) {
	res := result{name: fmt.Sprintf("SSE WatchJob x%d", watchers)}
	rssBefore, err := rss(e.server.Process.Pid)
	if err != nil {
		return res, err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1, // a watch holds its connection; none is reused
		DisableCompression:  true,
	}}
	defer client.CloseIdleConnections()

	r := &receipts{got: map[key][]time.Time{}}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ready, wg sync.WaitGroup
	errs := make(chan error, watchers)
	for i := range watchers {
		ready.Add(1)
		wg.Go(func() {
			first := true
			done := func() {
				if first {
					first = false
					ready.Done()
				}
			}
			defer done()
			err := sseWatch(wctx, client, e.httpBase+"/v1/jobs/"+e.jobIDs[i%len(e.jobIDs)]+":watch", func(at time.Time, ev *oncejobv1.JobEvent) {
				if first {
					done() // the backlog: subscribed
					return
				}
				r.add(key{ev.GetJobId(), ev.GetStatus(), ev.GetAttempt()}, at)
			})
			if err != nil && wctx.Err() == nil {
				errs <- err
			}
		})
	}
	ready.Wait()
	select {
	case err := <-errs:
		return res, err
	default:
	}
	time.Sleep(e.c.idle)
	rssIdle, err := rss(e.server.Process.Pid)
	if err != nil {
		return res, err
	}
	res.memPerWatcher = float64(rssIdle-rssBefore) / float64(watchers)
	fmt.Printf("  %d idle SSE watchers: server RSS %d -> %d MiB\n", watchers, rssBefore>>20, rssIdle>>20)

	before, err := e.dbStats(ctx)
	if err != nil {
		return res, err
	}
	start := time.Now()
	res.latencies, err = e.rounds(ctx, r, int64(watchers))
	if err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	err = e.dbRate(ctx, &res, before, elapsed)
	select {
	case err := <-errs:
		return res, err
	default:
	}
	return res, err
}

// sseWatch reads one event stream until ctx ends, calling onEvent for each
// `data` event with the time its data line was read and the
// WatchJobResponse's event.
func sseWatch(ctx context.Context, client *http.Client, url string, onEvent func(time.Time, *oncejobv1.JobEvent)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	sc := bufio.NewScanner(resp.Body)
	var msg struct {
		Event struct {
			JobID   string `json:"job_id"`
			Status  string `json:"status"`
			Attempt int32  `json:"attempt"`
		} `json:"event"`
	}
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "{}" {
			continue // id, retry, comments, the end event
		}
		// Received: what an EventSource hands its listener is the data
		// string; parsing it is the application's.
		at := time.Now()
		if err := json.Unmarshal([]byte(data), &msg); err != nil {
			return err
		}
		onEvent(at, &oncejobv1.JobEvent{
			JobId:   msg.Event.JobID,
			Status:  oncejobv1.JobStatus(oncejobv1.JobStatus_value[msg.Event.Status]),
			Attempt: msg.Event.Attempt,
		})
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
