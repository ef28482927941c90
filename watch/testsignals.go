package watch

import (
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/testsignal"
)

// TestSignals are the moments of a hub a test can wait for (see package
// testsignal). Each is off until the test calls its Init, before Run and
// before the watches it waits on start.
type TestSignals struct {
	// Woken: the notification source woke the hub with a notification,
	// and the hub has woken that event's watchers.
	Woken testsignal.Signal[store.JobEventNotification]
	// ChangesRead: a WatchJobs watcher read the change log; the value is
	// how many changes the read returned.
	ChangesRead testsignal.Signal[int]
	// Active: a watch started or ended; the value is the number of watches
	// running right after it (Active's value then).
	Active testsignal.Signal[int64]
	// SharedRead: a WatchShared reader read its value once.
	SharedRead testsignal.Signal[SharedParams]
	// Joined: a WatchJobs stream caught up and joined its tenant's feed;
	// the value is the tenant.
	Joined testsignal.Signal[string]
}

// TestSignals returns the hub's test signals.
func (h *Hub) TestSignals() *TestSignals { return &h.signals }
