package clientsdk_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

var update = flag.Bool("update", false, "rewrite the outputs of testdata/workid_vectors.json")

const vectorsFile = "testdata/workid_vectors.json"

// workIDVector is one case of the vectors shared with the Python SDK.
type workIDVector struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	Version   int      `json:"version"`
	Payload   string   `json:"payload"`
	Drop      []string `json:"drop,omitempty"`
	Canonical string   `json:"canonical,omitempty"`
	WorkID    string   `json:"work_id,omitempty"`
	Error     bool     `json:"error,omitempty"`
}

type submitKeyVector struct {
	Name         string `json:"name"`
	Pipeline     string `json:"pipeline"`
	Text         string `json:"text,omitempty"`
	DataBase64   string `json:"data_base64,omitempty"`
	MediaType    string `json:"media_type"`
	DocumentName string `json:"document_name"`
	ModelProfile string `json:"model_profile"`
	Params       string `json:"params"`
	Key          string `json:"key,omitempty"`
}

type vectorFile struct {
	Description string            `json:"description"`
	WorkID      []workIDVector    `json:"work_id"`
	SubmitKey   []submitKeyVector `json:"submit_key"`
}

// TestWorkIDVectors checks WorkID against the shared vectors, which the
// Python SDK's tests check too: both languages give the same key for every
// case, or both refuse it. With -update it rewrites the outputs from Go.
func TestWorkIDVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	var f vectorFile
	require.NoError(t, json.Unmarshal(raw, &f))
	require.GreaterOrEqual(t, len(f.WorkID), 50)

	for i, v := range f.WorkID {
		pre, errPre := clientsdk.WorkIDPreimage(v.Kind, v.Version, json.RawMessage(v.Payload), v.Drop)
		id, errID := clientsdk.WorkID(v.Kind, v.Version, json.RawMessage(v.Payload), v.Drop...)
		require.Equal(t, errPre == nil, errID == nil, v.Name)
		got := workIDVector{Name: v.Name, Kind: v.Kind, Version: v.Version, Payload: v.Payload, Drop: v.Drop}
		if errID != nil {
			got.Error = true
		} else {
			got.Canonical = string(pre[len(v.Kind)+len(":")+len(itoa(v.Version))+len(":"):])
			got.WorkID = id
			require.Len(t, id, 64)
		}
		if *update {
			f.WorkID[i] = got
			continue
		}
		require.Equal(t, v, got, "vector %q (rerun with -update only if the change is intended: it re-keys every client)", v.Name)
	}
	// Spellings of one intent share a key; these pairs hold by the
	// algorithm, not by what the file says.
	byName := map[string]workIDVector{}
	for _, v := range f.WorkID {
		byName[v.Name] = v
	}
	for a, b := range map[string]string{
		"keys out of order":             "keys in order",
		"number: 1.0":                   "number: 1",
		"number: 1e0":                   "number: 1",
		"number: 10e-1":                 "number: 1",
		"number: -0.0":                  "number: -0",
		"number: 2^53+1 rounds to 2^53": "number: 2^53 exponent form",
		"drop: top-level member":        "drop: result equals payload without it",
		"drop: absent member ignored":   "drop: result equals payload without it",
	} {
		require.NotEmpty(t, byName[a].WorkID, a)
		require.Equal(t, byName[b].WorkID, byName[a].WorkID, "%q and %q are one intent", a, b)
	}
	require.NotEqual(t, byName["kind and version 1"].WorkID, byName["kind and version 2"].WorkID)
	require.NotEqual(t, byName["string: combining accent is not composed"].WorkID, byName["string: precomposed accent"].WorkID)

	for i, v := range f.SubmitKey {
		key, err := clientsdk.SubmitKey(submitRequest(t, v))
		require.NoError(t, err, v.Name)
		if *update {
			f.SubmitKey[i].Key = key
			continue
		}
		require.Equal(t, v.Key, key, v.Name)
	}
	if *update {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		require.NoError(t, enc.Encode(f))
		require.NoError(t, os.WriteFile(vectorsFile, buf.Bytes(), 0o644))
	}
}

func itoa(n int) string { return strings.TrimSpace(string(must(json.Marshal(n)))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func submitRequest(t *testing.T, v submitKeyVector) *oncejobv1.SubmitJobRequest {
	t.Helper()
	var params map[string]any
	require.NoError(t, json.Unmarshal([]byte(v.Params), &params))
	st, err := structpb.NewStruct(params)
	require.NoError(t, err)
	doc := &oncejobv1.Document{MediaType: v.MediaType, Name: v.DocumentName}
	if v.DataBase64 != "" {
		data, err := base64.StdEncoding.DecodeString(v.DataBase64)
		require.NoError(t, err)
		doc.Content = &oncejobv1.Document_Data{Data: data}
	} else {
		doc.Content = &oncejobv1.Document_Text{Text: v.Text}
	}
	return &oncejobv1.SubmitJobRequest{Pipeline: v.Pipeline, Document: doc, Params: st, ModelProfile: v.ModelProfile}
}
