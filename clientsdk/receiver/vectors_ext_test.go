package receiver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk/receiver"
)

// webhookVectors is clientsdk/testdata/webhooks/vectors.json: requests
// signed by the official Standard Webhooks library (gen.mjs), shared with
// the Python receiver's tests.
type webhookVectors struct {
	Library          string `json:"library"`
	Now              int64  `json:"now"`
	ToleranceSeconds int64  `json:"tolerance_seconds"`
	Vectors          []struct {
		Name    string            `json:"name"`
		Secrets []string          `json:"secrets"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
		Verify  string            `json:"verify"`
		Status  int               `json:"status"`
	} `json:"vectors"`
}

func loadWebhookVectors(t *testing.T) webhookVectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/webhooks/vectors.json")
	require.NoError(t, err)
	var v webhookVectors
	require.NoError(t, json.Unmarshal(b, &v))
	require.NotEmpty(t, v.Vectors)
	return v
}

// TestVerifyLibraryVectors: every vector signed by the official library is
// verified as the file says at its fixed "now" - accepted, or refused for
// the reason it names (missing headers, stale, no matching signature) -
// and the handler answers its status, applying the event only on 200, and
// a second delivery of an applied vector applies nothing and is 200 again.
func TestVerifyLibraryVectors(t *testing.T) {
	t.Parallel()
	vs := loadWebhookVectors(t)
	require.Equal(t, receiver.Tolerance, time.Duration(vs.ToleranceSeconds)*time.Second)
	now := time.Unix(vs.Now, 0)
	want := map[string]error{"ok": nil, "missing_headers": receiver.ErrMissingHeaders, "stale": receiver.ErrStale, "signature": receiver.ErrSignature}
	seen := map[string]int{}
	for _, vec := range vs.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			wantErr, ok := want[vec.Verify]
			require.True(t, ok, "unknown verdict %q", vec.Verify)
			seen[vec.Verify]++
			v, err := receiver.NewVerifier(vec.Secrets...)
			require.NoError(t, err)
			v.Now = func() time.Time { return now }
			h := http.Header{}
			for k, val := range vec.Headers {
				h.Set(k, val)
			}
			err = v.Verify(h, []byte(vec.Body))
			if wantErr == nil {
				require.NoError(t, err)
			} else {
				require.True(t, errors.Is(err, wantErr), "got %v, want %v", err, wantErr)
			}

			inbox := &countingInbox{}
			handler := receiver.NewHandler(v, inbox)
			deliver := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewBufferString(vec.Body))
				req.Header = h.Clone()
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				return rec
			}
			rec := deliver()
			require.Equal(t, vec.Status, rec.Code, rec.Body.String())
			if vec.Status != http.StatusOK {
				require.Empty(t, inbox.applied, "a refused request applies nothing")
				return
			}
			require.JSONEq(t, `{"applied": true, "receipt": "r"}`, rec.Body.String())
			again := deliver()
			require.Equal(t, http.StatusOK, again.Code)
			require.JSONEq(t, `{"applied": false, "receipt": "r"}`, again.Body.String())
			require.Len(t, inbox.applied, 1)
		})
	}
	for verdict := range want {
		require.Positive(t, seen[verdict], "no vector for %s", verdict)
	}
}

// TestParseEventEnvelopes: clientsdk/testdata/webhooks/envelopes.json, the
// bodies the Python receiver's tests also read, are read as the event it
// names or refused.
func TestParseEventEnvelopes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../testdata/webhooks/envelopes.json")
	require.NoError(t, err)
	var file struct {
		Envelopes []struct {
			Name       string  `json:"name"`
			Body       string  `json:"body"`
			BodyBase64 string  `json:"body_base64"`
			ID         *string `json:"id"`
		} `json:"envelopes"`
	}
	require.NoError(t, json.Unmarshal(b, &file))
	require.NotEmpty(t, file.Envelopes)
	for _, env := range file.Envelopes {
		body := []byte(env.Body)
		if env.BodyBase64 != "" {
			body, err = base64.StdEncoding.DecodeString(env.BodyBase64)
			require.NoError(t, err)
		}
		e, err := receiver.ParseEvent(body)
		if env.ID == nil {
			require.Error(t, err, env.Name)
			continue
		}
		require.NoError(t, err, env.Name)
		require.Equal(t, *env.ID, e.ID, env.Name)
	}
}
