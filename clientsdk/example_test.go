package clientsdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// One intent, one key: key order, white space and number spelling do not
// matter, and volatile members are dropped before hashing.
func ExampleWorkID() {
	a, _ := clientsdk.WorkID("invoice.extract", 1, map[string]any{
		"invoice": "INV-42", "total": 1200, "received_at": "2026-12-03T09:00:00Z",
	}, "/received_at")
	b, _ := clientsdk.WorkID("invoice.extract", 1, map[string]any{
		"total": 1200.0, "invoice": " INV-42 ", "received_at": "2026-12-04T10:30:00Z",
	}, "/received_at")
	fmt.Println(a == b)
	fmt.Println(a)
	// Output:
	// true
	// 599d2e640612440543a32b8742e58436270941bfd4167900cf31aecd4adf1fc3
}

// The same page, however a crawler found it, is one URL and so one WorkID.
func ExampleNormalizeURL() {
	for _, raw := range []string{
		"HTTPS://Example.com:443/pricing?utm_source=news&plan=pro&a=1#faq",
		"https://example.com/pricing?a=1&plan=pro&gclid=xyz",
	} {
		u, _ := clientsdk.NormalizeURL(raw)
		fmt.Println(u)
	}
	// Output:
	// https://example.com/pricing?a=1&plan=pro
	// https://example.com/pricing?a=1&plan=pro
}

// Submit once, then wait for the result. Run it twice: the second Submit
// is a replay of the first job, not a new one.
func ExampleClient_Submit() {
	c, err := clientsdk.Dial("127.0.0.1:7070")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res, err := c.Submit(ctx, &oncejobv1.SubmitJobRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Data{Data: []byte("Invoice 42 ...")}, MediaType: "text/plain", Name: "invoice-42.txt"},
	})
	var reused *clientsdk.KeyReusedError
	switch {
	case errors.As(err, &reused):
		log.Fatalf("key %s already names another request", reused.Key)
	case errors.Is(err, clientsdk.ErrBudgetSpent):
		log.Fatalf("gave up after retrying: %v", err) // safe to run again later: same key
	case err != nil:
		log.Fatal(err)
	}
	job, err := c.Wait(ctx, res.Job.GetId())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.GetStatus(), job.GetOutput().GetFields()["summary"].GetStringValue())
}

// Watch yields every event of a job once, in order, until it ends,
// reconnecting after a broken stream (to another replica, given several
// addresses) from the last event it yielded.
func ExampleClient_Watch() {
	c, err := clientsdk.Dial("10.0.0.1:7070,10.0.0.2:7070")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for e, err := range c.Watch(context.Background(), "01a23b3f-a191-7542-9642-1d1a0fb6c5bb") {
		if err != nil {
			log.Fatal(err) // ErrNotFound, or a *BudgetError after repeated failures
		}
		fmt.Println(e.GetSeq(), e.GetStatus(), e.GetStage(), e.GetMessage())
	}
}
