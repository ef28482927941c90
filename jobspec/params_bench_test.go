package jobspec_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/pipeline"
)

// BenchmarkParams is the keys of one submission as bench/submit sends it
// (a 1 KiB document, no params) and with a few params: the document's
// sha256, the dedup key and the fingerprint, the params' canonical JSON.
func BenchmarkParams(b *testing.B) {
	reg := pipeline.Builtin()
	doc := &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "new-1 " + strings.Repeat("x", 1018)}}
	params, err := structpb.NewStruct(map[string]any{"language": "en", "max_words": 50, "tone": "dry"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  *oncejobv1.SubmitJobRequest
	}{
		{"no params", &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: doc}},
		{"three params", &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: doc, Params: params}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jobspec.Params(reg, key, c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
