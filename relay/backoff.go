package relay

import (
	"strconv"
	"time"

	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// next decides where a delivery goes after an attempt: delivered, due again
// after a full-jitter exponential backoff (at least Retry-After), or dead
// when the budget - attempts, or the age since the budget started - would be
// spent.
func next(p RetryPolicy, d *store.Delivery, res Result, now time.Time) (store.DeliveryStatus, time.Time, string) {
	switch res.Outcome {
	case store.DeliveryOutcomeDelivered:
		return store.DeliveryStatusDelivered, now, ""
	case store.DeliveryOutcomeDeadLettered:
		return store.DeliveryStatusDeadLettered, now, ""
	case store.DeliveryOutcomeSinkDisabled:
		// Waits, unclaimed, until the sink is enabled again.
		return store.DeliveryStatusPending, now, ""
	}
	if int(d.Attempts) >= p.MaxAttempts {
		return store.DeliveryStatusDeadLettered, now, "retry budget spent: " + strconv.Itoa(int(d.Attempts)) + " attempts"
	}
	due := now.Add(p.Wait(int(d.Attempts), res.RetryAfter, retry.Jitter()))
	if due.After(d.BudgetStartedAt.Add(p.MaxAge)) {
		return store.DeliveryStatusDeadLettered, now, "retry budget spent: the next attempt would pass max_age " + p.MaxAge.String()
	}
	return store.DeliveryStatusPending, due, ""
}
