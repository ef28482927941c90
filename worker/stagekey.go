package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"

	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/store"
)

// Code versions of the stages. Bump one when its logic changes: its stage
// keys change, so the decision cache stops serving the old results for it,
// and only for it.
const (
	extractVersion  = "1"
	chunkVersion    = "1"
	llmVersion      = "1"
	mergeVersion    = "1"
	validateVersion = "1"
)

// stageKey is "stage:v1:" and the sha256 of the canonical JSON of the stage,
// its code version and what decides its output.
func stageKey(stage store.JobStage, codeVersion string, inputs map[string]any) string {
	inputs = maps.Clone(inputs) // the caller's map stays as it was
	inputs["stage"] = string(stage)
	inputs["code_version"] = codeVersion
	b, err := jobkey.Canonical(inputs)
	if err != nil {
		panic("worker: stage key inputs are not canonical JSON: " + err.Error()) // our own values only
	}
	sum := sha256.Sum256(b)
	return "stage:v1:" + hex.EncodeToString(sum[:])
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// providerKey is the idempotency key sent to the provider for one call: the
// same on every retry of that call, so a provider that honours it bills
// once. It names the stage key too: when a replay re-runs a stage whose
// inputs changed (a new prompt, a new validator), the call is a new one and
// must not be answered with, or refused for, the old one.
func providerKey(jobID string, stage store.JobStage, stageKey string, chunk int32, round int) string {
	b, _ := jobkey.Canonical(map[string]any{"job": jobID, "stage": string(stage), "stage_key": stageKey, "chunk": chunk, "round": round})
	sum := sha256.Sum256(b)
	return "oncejob-pk-v1-" + hex.EncodeToString(sum[:16])
}
