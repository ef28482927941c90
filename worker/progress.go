package worker

import (
	"context"

	"github.com/oncejob/oncejob/store"
)

// stageProgress is where the attempt's stages stand: what the job had when
// it was claimed (its document, its checkpoints), the deterministic stages
// computed ahead of their turn, and the key of the stage being computed.
type stageProgress struct {
	// document is the job's document as the claim read it until its text
	// is extracted; nil: read it.
	document []byte
	// The job's checkpoints as the claim read them, when claimedRead (a
	// first attempt has none), until load indexes them in done.
	claimed     []*store.Checkpoint
	claimedRead bool
	done        map[cpKey]*store.Checkpoint
	// ahead are the deterministic stages computed ahead, by key.
	ahead []computedStage
	// current is the key of the stage being computed: a call's provider
	// key is made of it.
	current string
}

type cpKey struct {
	stage store.JobStage
	chunk int32
}

// computedStage is a deterministic stage's output computed ahead.
type computedStage struct {
	key    string
	output []byte
}

func newStageProgress(claimed *store.JobWork) stageProgress {
	return stageProgress{document: claimed.Document, claimed: claimed.Checkpoints, claimedRead: claimed.CheckpointsRead}
}

// load indexes the job's checkpoints: as the claim read them, or read now.
func (p *stageProgress) load(ctx context.Context, st store.EngineStore, jobID string) error {
	p.done = map[cpKey]*store.Checkpoint{}
	cps := p.claimed
	if !p.claimedRead { // the claim did not read them
		var err error
		if cps, err = st.CheckpointList(ctx, &store.CheckpointListParams{JobID: jobID}); err != nil {
			return err
		}
	}
	for _, cp := range cps {
		p.done[cpKey{cp.Stage, cp.Chunk}] = cp
	}
	p.claimed = nil
	return nil
}

// claimedDocument is the document the claim read; nil: read it.
func (p *stageProgress) claimedDocument() []byte { return p.document }

// textExtracted drops the document: an in-flight job keeps little.
func (p *stageProgress) textExtracted() { p.document = nil }

// checkpointed is the output of this job's checkpoint of s, when one's key
// is key.
func (p *stageProgress) checkpointed(s stageSpec, key string) ([]byte, bool) {
	if cp, ok := p.done[cpKey{s.stage, s.chunk}]; ok && cp.StageKey == key {
		return cp.Output, true
	}
	return nil, false
}

// computedAhead keeps a deterministic stage's output, computed ahead of
// its turn.
func (p *stageProgress) computedAhead(key string, output []byte) {
	p.ahead = append(p.ahead, computedStage{key: key, output: output})
}

// aheadOf is what was computed ahead of the stage whose key is key.
func (p *stageProgress) aheadOf(key string) ([]byte, bool) {
	for _, c := range p.ahead {
		if c.key == key {
			return c.output, true
		}
	}
	return nil, false
}

// dropAhead forgets the stages computed ahead, once their turns came.
func (p *stageProgress) dropAhead() { p.ahead = nil }

// begin records that the stage whose key is key is being computed.
func (p *stageProgress) begin(key string) { p.current = key }

// currentKey is the key of the stage being computed.
func (p *stageProgress) currentKey() string { return p.current }
