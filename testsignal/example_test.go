package testsignal_test

import (
	"fmt"

	"github.com/oncejob/oncejob/testsignal"
)

// worker is code under test with a moment a test may wait for.
type worker struct {
	claimed testsignal.Signal[string]
}

func (w *worker) run(jobs []string) {
	for _, id := range jobs {
		w.claimed.Signal(id) // a no-op unless a test called Init
	}
}

func ExampleSignal() {
	w := &worker{}
	w.claimed.Init() // before the code under test starts
	go w.run([]string{"job-1", "job-2"})

	got, err := w.claimed.WaitFor(func(id string) bool { return id == "job-2" })
	fmt.Println(got, err)
	// Output: job-2 <nil>
}
