package worker

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/store"
)

// checkpointBuffer is what the attempt's next durable write carries:
// checkpoints computed but not written yet, and the stage the job reached
// that its row does not hold yet. That write is an LLM answer's (flush with
// its journal row), the settling flush, or the publish (drain), fenced by
// the attempt's lease like every other (docs/architecture.md, "The batched
// engine").
type checkpointBuffer struct {
	st    store.EngineStore
	lease store.Lease
	// timeout bounds a flush: the lease, not less, since thousands of calls
	// that return together queue their writes for the pool's connections,
	// and a write given up sends its job to wait for its lease to expire.
	timeout time.Duration
	// writer, when set, makes the flush with other jobs' (checkpointwriter.go).
	writer *checkpointWriter

	pending []store.StageCheckpoint
	// stageTo is the stage reached that the row does not hold yet ("":
	// none); stageWritten is the stage the row holds.
	stageTo, stageWritten store.JobStage
}

func newCheckpointBuffer(st store.EngineStore, writer *checkpointWriter, lease store.Lease, written store.JobStage, leaseDuration time.Duration) checkpointBuffer {
	return checkpointBuffer{st: st, writer: writer, lease: lease, stageWritten: written, timeout: max(10*time.Second, leaseDuration)}
}

// add buffers cp for the next durable write.
func (b *checkpointBuffer) add(cp store.StageCheckpoint) { b.pending = append(b.pending, cp) }

// dropLast forgets the checkpoint added last: its output rests on a call
// the journal does not hold, so no later write may carry it (its usage
// would never be counted).
func (b *checkpointBuffer) dropLast() { b.pending = b.pending[:len(b.pending)-1] }

// reach records that the job reached stage, when that is past the stage
// its row holds: the next durable write carries it, with no event of its
// own (a stage-only advance is not a status transition).
func (b *checkpointBuffer) reach(stage store.JobStage) {
	if stage.After(b.stageWritten) && stage.After(b.stageTo) {
		b.stageTo = stage
	}
}

// flush writes the pending checkpoints and the stage reached, fenced, and
// journals attempt with them in the same write when set: through the
// worker's checkpoint writer, batched with other jobs' writes, when the
// store offers it, and returns once that write committed. The journal
// outlives the lease: it is written even when the job's context is gone or
// its lease lost. When the write fails, nothing is forgotten: unjournaled
// usage is not checkpointed, since neither was written.
func (b *checkpointBuffer) flush(ctx context.Context, attempt *store.LLMAttempt) error {
	if len(b.pending) == 0 && attempt == nil && b.stageTo == "" {
		return nil
	}
	failpoint.Inject(failpoint.BeforeCheckpointWrite)
	params := &store.CheckpointWriteManyParams{
		Lease: b.lease, Checkpoints: b.pending, Attempt: attempt, Stage: b.stageTo,
	}
	var err error
	if b.writer != nil {
		err = b.writer.write(params, b.timeout)
	} else {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
		err = b.st.CheckpointWriteMany(wctx, params)
		cancel()
	}
	if err != nil {
		return err
	}
	b.pending = nil
	if b.stageTo != "" {
		b.stageWritten, b.stageTo = b.stageTo, ""
	}
	failpoint.Inject(failpoint.AfterCheckpointWrite)
	return nil
}

// drain hands the pending checkpoints to write, a durable write of the
// attempt's other than flush (the publish), and forgets them once it
// succeeded.
func (b *checkpointBuffer) drain(write func([]store.StageCheckpoint) error) error {
	if err := write(b.pending); err != nil {
		return err
	}
	b.pending = nil
	return nil
}
