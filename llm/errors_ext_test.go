package llm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
)

func TestClassNamesAreStable(t *testing.T) {
	t.Parallel()
	want := map[llm.Class]string{
		llm.ClassRateLimited:    "rate_limited",
		llm.ClassUnavailable:    "unavailable",
		llm.ClassOutcomeUnknown: "outcome_unknown",
		llm.ClassInvalidRequest: "invalid_request",
		llm.ClassInvalidOutput:  "invalid_output",
	}
	for class, name := range want {
		require.Equal(t, name, class.String())
		parsed, ok := llm.ParseClass(name)
		require.True(t, ok)
		require.Equal(t, class, parsed)
	}
	_, ok := llm.ParseClass("nope")
	require.False(t, ok)
	require.Equal(t, "class(0)", llm.Class(0).String())
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	require.True(t, llm.Retryable(llm.ClassRateLimited))
	require.True(t, llm.Retryable(llm.ClassUnavailable))
	require.True(t, llm.Retryable(llm.ClassOutcomeUnknown))
	require.False(t, llm.Retryable(llm.ClassInvalidRequest))
	require.False(t, llm.Retryable(llm.ClassInvalidOutput))
	require.False(t, llm.Retryable(0))
}

func TestClassOfWrappedError(t *testing.T) {
	t.Parallel()
	inner := &llm.Error{Class: llm.ClassOutcomeUnknown, StatusCode: 0, Message: "no answer", Err: context.DeadlineExceeded}
	err := fmt.Errorf("stage llm_done: %w", inner)
	class, ok := llm.ClassOf(err)
	require.True(t, ok)
	require.Equal(t, llm.ClassOutcomeUnknown, class)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "llm: outcome_unknown: no answer: context deadline exceeded", inner.Error())

	_, ok = llm.ClassOf(errors.New("plain"))
	require.False(t, ok)
	require.Equal(t, "llm: rate_limited (HTTP 429): slow down",
		(&llm.Error{Class: llm.ClassRateLimited, StatusCode: 429, Message: "slow down"}).Error())
}
