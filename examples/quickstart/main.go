// Command quickstart submits a document to oncejob once, follows it through
// its stages and prints the summary. Against `oncejob serve`:
//
//	go run ./examples/quickstart
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

func main() {
	c, err := clientsdk.Dial(cmp.Or(os.Getenv("ONCEJOB_ADDR"), "127.0.0.1:7070"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// No key given: Submit derives one from the request (SubmitKey), so
	// running this twice is one job — the second run is a replay.
	res, err := c.Submit(ctx, &oncejobv1.SubmitJobRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{
			Text: "Invoice 42: 3 licences, EUR 1,200, due 2026-12-31.",
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job %s (replayed: %t)\n", res.Job.GetId(), res.Replayed())
	// Deduplicated: the same computation (document, pipeline, prompt,
	// model) had already run under another key; its result is reused.
	if res.Deduplicated() {
		fmt.Printf("deduplicated: true (job %s already computed it; no new generation)\n", res.Job.GetDeduplicatedFrom())
	} else {
		fmt.Println("deduplicated: false (a new computation)")
	}

	// Every event once, in order, even if the stream breaks on the way.
	for e, err := range c.Watch(ctx, res.Job.GetId()) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  %s %s\n", e.GetStatus(), e.GetStage())
	}
	job, err := c.Get(ctx, res.Job.GetId())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("summary:", job.GetOutput().GetFields()["summary"].GetStringValue())
}
