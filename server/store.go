package server

import (
	"context"

	"github.com/oncejob/oncejob/store"
)

// Store is every capability the server uses, checked by the compiler where
// a store is passed in (both drivers implement it): no handler finds a
// capability at run time or answers UNIMPLEMENTED for a store that lacks
// one. See docs/architecture.md, "Stores".
type Store interface {
	store.Store
	store.ViewStore
	store.OperatorStore
	store.RunStore
	store.ScheduleStore
	store.DeliveryStore
	// The FULL view's checkpoints and attempt journal (of store.EngineStore).
	CheckpointList(ctx context.Context, params *store.CheckpointListParams) ([]*store.Checkpoint, error)
	LLMAttemptList(ctx context.Context, params *store.LLMAttemptListParams) ([]*store.LLMAttempt, error)
	// A run's provider batches (of store.ProviderBatchStore).
	RunBatchList(ctx context.Context, params *store.RunBatchListParams) ([]*store.RunBatch, error)
}
