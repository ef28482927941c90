package relay

import "encoding/json"

// Envelope is version 1 of an event's payload, as the store writes it.
// Receivers parse the same shape (see clientsdk/receiver).
type Envelope struct {
	Version int    `json:"version"`
	Type    string `json:"type"`
	ID      string `json:"id"`
	Time    string `json:"time"`
	Data    struct {
		JobID            string          `json:"job_id"`
		Tenant           string          `json:"tenant"`
		Pipeline         string          `json:"pipeline"`
		PipelineVersion  int32           `json:"pipeline_version"`
		PromptVersion    string          `json:"prompt_version"`
		ModelProfile     string          `json:"model_profile"`
		DedupKey         string          `json:"dedup_key"`
		DeduplicatedFrom *string         `json:"deduplicated_from"`
		Generation       int             `json:"generation"`
		Status           string          `json:"status"`
		Stage            string          `json:"stage"`
		Attempt          int32           `json:"attempt"`
		Output           json.RawMessage `json:"output"`
		Error            *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	} `json:"data"`
}
