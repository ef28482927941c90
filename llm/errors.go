package llm

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Class is what kind of failure a provider call had; the worker acts on the
// class, never on the provider's own error codes (docs/architecture.md,
// "Failures").
type Class int

const (
	// ClassRateLimited: the provider refused the call for now (HTTP 429).
	// Retry after Error.RetryAfter, or with backoff when it is zero.
	ClassRateLimited Class = iota + 1
	// ClassUnavailable: the provider did not take the call (5xx, connection
	// refused, a timeout before the request was fully sent). Nothing was
	// billed; retry with backoff.
	ClassUnavailable
	// ClassOutcomeUnknown: the request was sent but no usable answer came
	// back (a timeout, the caller's cancellation or a lost connection while
	// awaiting the response, a 2xx whose body is not a completion). The provider may have finished
	// and billed the call. The pipeline's policy decides: retry with the
	// same provider key, or reconcile through Provider.Lookup.
	ClassOutcomeUnknown
	// ClassInvalidRequest: the provider rejected the call itself (other
	// 4xx). Retrying the same request cannot help.
	ClassInvalidRequest
	// ClassInvalidOutput: the provider answered but the output failed the
	// pipeline's validation. Raised by the worker's validator, not by a
	// Provider; defined here so the journal has one vocabulary. Repairs are
	// new requests, so the class is not retryable.
	ClassInvalidOutput
)

var classNames = map[Class]string{
	ClassRateLimited:    "rate_limited",
	ClassUnavailable:    "unavailable",
	ClassOutcomeUnknown: "outcome_unknown",
	ClassInvalidRequest: "invalid_request",
	ClassInvalidOutput:  "invalid_output",
}

// String returns the class's stable name, as stored in the attempt journal:
// "rate_limited", "unavailable", "outcome_unknown", "invalid_request" or
// "invalid_output".
func (c Class) String() string {
	if name, ok := classNames[c]; ok {
		return name
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// ParseClass returns the class whose String is name.
func ParseClass(name string) (Class, bool) {
	for c, n := range classNames {
		if n == name {
			return c, true
		}
	}
	return 0, false
}

// Retryable reports whether the same request, with the same provider key,
// may succeed later: true for rate limited, unavailable and outcome unknown.
// For outcome unknown the pipeline's policy still chooses between retrying
// and reconciling; a retry is safe from double billing only on a provider
// that honours provider keys.
func Retryable(c Class) bool {
	switch c {
	case ClassRateLimited, ClassUnavailable, ClassOutcomeUnknown:
		return true
	}
	return false
}

// Error is a classified provider failure.
type Error struct {
	Class Class
	// RetryAfter is the provider's hint for ClassRateLimited (or a 503 that
	// sent Retry-After); zero when it gave none.
	RetryAfter time.Duration
	// StatusCode is the HTTP status of the provider's answer; 0 when none
	// came.
	StatusCode int
	// Message is the provider's error message, if any.
	Message string
	// RateLimits is what the answer's headers said of the provider's rate
	// limits; nil when there was no answer or it sent none.
	RateLimits *RateLimits
	// Err is the underlying transport or context error, if any: a
	// deadline shows as errors.Is(err, context.DeadlineExceeded).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llm: ")
	b.WriteString(e.Class.String())
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of the first *Error in err's chain.
func ClassOf(err error) (Class, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Class, true
	}
	return 0, false
}
