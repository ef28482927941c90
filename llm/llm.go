// Package llm is oncejob's view of a language-model provider: the Provider
// interface, the request and response of one generation, and the failure
// classes the worker acts on (docs/architecture.md, "Failures").
//
// Implementations: OpenAIClient in this package speaks the OpenAI Chat
// Completions protocol (OpenAI, vLLM, llama.cpp, Ollama and the simulator in
// llm/llmsim). Every call carries a provider key, sent as the provider's
// idempotency key, so a retry of the same call is never paid for twice by a
// provider that honours it.
package llm

import (
	"context"
	"encoding/json"
	"errors"
)

// Request is one generation.
type Request struct {
	// Model is the provider's model name. Required.
	Model string
	// Messages is the conversation, oldest first. At least one.
	Messages []Message
	// Temperature is sent as is; 0 asks for the most deterministic output.
	Temperature float64
	// ResponseFormat is the OpenAI response_format object (for example
	// {"type":"json_schema","json_schema":{...}}), sent verbatim; nil sends
	// none.
	ResponseFormat json.RawMessage
	// MaxTokens caps the completion; 0 leaves it to the provider.
	MaxTokens int
	// ProviderKey names this call's attempt family: it must be the same on
	// every retry of the same call, so the provider can answer a retry from
	// the call it already finished (docs/architecture.md, "Provider keys"). 1-255 printable ASCII
	// characters; empty sends no key, which makes every attempt a new,
	// separately billed call that Lookup cannot find.
	ProviderKey string
}

// Message is one chat message.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
}

// Response is a finished generation.
type Response struct {
	// Content is the text of the first choice. The provider's own format
	// check is not trusted: the caller validates it.
	Content          string
	PromptTokens     int64
	CompletionTokens int64
	// ProviderRequestID identifies the billed call at the provider, for the
	// attempt journal and for support requests.
	ProviderRequestID string
	// Model is the model that answered, as the provider names it.
	Model string
	// FinishReason is the provider's reason to stop: "stop", or "length"
	// when MaxTokens cut the content short.
	FinishReason string
	// Replayed reports that the provider answered from its idempotency store
	// the call it had already finished under the same provider key: nothing
	// was billed for this attempt. Only providers that say so set it.
	Replayed bool
	// RateLimits is what the answer's headers said of the provider's rate
	// limits; nil when it sent none.
	RateLimits *RateLimits
}

// Provider generates text and says, on failure, what kind of failure it was.
// Implementations are safe for concurrent use.
type Provider interface {
	// Generate runs one generation. Three things can happen:
	//
	//  1. It returns a Response: the provider finished the call and billed
	//     it, or answered a retry from the call it finished earlier under
	//     the same provider key.
	//  2. It returns an error for which ClassOf reports a Class:
	//     ClassRateLimited (RetryAfter may carry the provider's hint),
	//     ClassUnavailable (the provider did not take the call),
	//     ClassInvalidRequest (retrying cannot help), or
	//     ClassOutcomeUnknown: the request reached the provider but no
	//     usable answer came back, so the call may have been billed; retry
	//     with the same provider key, or ask Lookup.
	//  3. It returns an error without a class only for a nil Request or
	//     another programming error.
	//
	// Generate never retries a call itself, apart from the transport's
	// resend of a request that never reached the provider; retries and
	// their budget belong to the caller.
	Generate(ctx context.Context, req *Request) (*Response, error)

	// Lookup returns the response of the call the provider finished under
	// providerKey. It returns ErrNotFound if the provider holds no finished
	// call with that key (a call still in flight may finish later; a retry
	// with the same key is then answered from it), ErrLookupUnsupported if
	// the provider cannot look calls up (CanLookup is false), or an error
	// of class ClassUnavailable or ClassRateLimited when it could not ask.
	// Lookup bills nothing.
	Lookup(ctx context.Context, providerKey string) (*Response, error)

	// CanLookup reports whether Lookup can answer at all. It is a fixed
	// property of the provider as configured, the same for its whole life,
	// so the engine decides how an unknown outcome is settled (the
	// reconciler's lookup, or only ResolveJob) without a call to ask.
	CanLookup() bool
}

var (
	// ErrNotFound is returned by Lookup when the provider holds no finished
	// call under the key.
	ErrNotFound = errors.New("llm: no finished call under this provider key")
	// ErrLookupUnsupported is returned by Lookup when the provider has no
	// way to look a call up by key; the outcome must then be settled some
	// other way (a retry with the same key, or ResolveJob).
	ErrLookupUnsupported = errors.New("llm: provider does not support lookup by provider key")
)
