package llmsim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm/llmsim"
)

func upload(t *testing.T, sim *llmsim.Running, purpose, name, content string) answer {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	require.NoError(t, mw.WriteField("purpose", purpose))
	part, err := mw.CreateFormFile("file", name)
	require.NoError(t, err)
	_, _ = part.Write([]byte(content))
	require.NoError(t, mw.Close())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, sim.URL+"/files", &body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, buf.Bytes()}
}

func line(id string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"sim-1","messages":[{"role":"user","content":"words of %s"}]}}`+"\n", id, id)
}

func TestBatchEndpointsRefuseBadInput(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	require.Equal(t, http.StatusBadRequest, upload(t, sim, "fine-tune", "x.jsonl", line("a")).status)
	a := upload(t, sim, "batch", "x.jsonl", line("a"))
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	var f struct{ ID, Purpose, Filename string }
	require.NoError(t, json.Unmarshal(a.body, &f))
	require.Equal(t, "batch", f.Purpose)
	require.Equal(t, "x.jsonl", f.Filename)

	for _, body := range []string{
		`{"input_file_id":"` + f.ID + `","endpoint":"/v1/embeddings","completion_window":"24h"}`,
		`{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"1h"}`,
		`{"input_file_id":"file-none","endpoint":"/v1/chat/completions","completion_window":"24h"}`,
		`{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"k":"` + string(bytes.Repeat([]byte("v"), 513)) + `"}}`,
		`not json`,
	} {
		got := do(t, http.MethodPost, sim.URL+"/batches", "", body)
		require.Equal(t, http.StatusBadRequest, got.status, body)
		require.Contains(t, string(got.body), `"error"`)
	}
	require.Zero(t, sim.Stats().BatchesCreated)
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, sim.URL+"/batches/batch_none", "", "").status)
	require.Equal(t, http.StatusNotFound, do(t, http.MethodPost, sim.URL+"/batches/batch_none/cancel", "", "").status)
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, sim.URL+"/files/file-none/content", "", "").status)
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodGet, sim.URL+"/batches?limit=0", "", "").status)
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodGet, sim.URL+"/batches?after=batch_none", "", "").status)

	// Batch faults are set like the others, and checked.
	got := do(t, http.MethodPost, sim.URL+"/oncejob/faults", "", `{"batch_line_fail":{"every":10},"batch_expire":{"count":1,"completed":0.5}}`)
	require.Equal(t, http.StatusOK, got.status, string(got.body))
	require.Equal(t, 10, sim.Faults().BatchLineFail.Every)
	got = do(t, http.MethodPost, sim.URL+"/oncejob/faults", "", `{"batch_expire":{"completed":2}}`)
	require.Equal(t, http.StatusBadRequest, got.status)
}

// The list is newest first and pages with after; the output file holds one
// line per request, found by custom_id.
func TestBatchListAndOutputFile(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	var ids []string
	for i := range 5 {
		a := upload(t, sim, "batch", "in.jsonl", line(fmt.Sprint("k", i))+line(fmt.Sprint("j", i)))
		var f struct{ ID string }
		require.NoError(t, json.Unmarshal(a.body, &f))
		got := do(t, http.MethodPost, sim.URL+"/batches", "", `{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"n":"`+fmt.Sprint(i)+`"}}`)
		require.Equal(t, http.StatusOK, got.status, string(got.body))
		var b struct{ ID string }
		require.NoError(t, json.Unmarshal(got.body, &b))
		ids = append(ids, b.ID)
	}
	var seen []string
	after := ""
	for {
		u := sim.URL + "/batches?limit=2"
		if after != "" {
			u += "&after=" + after
		}
		got := do(t, http.MethodGet, u, "", "")
		require.Equal(t, http.StatusOK, got.status)
		var page struct {
			Data []struct {
				ID           string `json:"id"`
				Status       string `json:"status"`
				OutputFileID string `json:"output_file_id"`
			} `json:"data"`
			HasMore bool   `json:"has_more"`
			LastID  string `json:"last_id"`
		}
		require.NoError(t, json.Unmarshal(got.body, &page))
		for _, b := range page.Data {
			seen = append(seen, b.ID)
			require.Equal(t, "completed", b.Status)
			out := do(t, http.MethodGet, sim.URL+"/files/"+b.OutputFileID+"/content", "", "")
			require.Equal(t, http.StatusOK, out.status)
			require.Equal(t, 2, bytes.Count(out.body, []byte("\n")))
			require.Contains(t, string(out.body), `"status_code":200`)
		}
		if !page.HasMore {
			break
		}
		after = page.LastID
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, seen)
	st := sim.Stats()
	require.EqualValues(t, 10, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls)
	require.EqualValues(t, 1, st.BatchCallsByKey["k3"])
}
