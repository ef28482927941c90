package server_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/server"
)

// TestSpecError: jobspec's plain errors become INVALID_ARGUMENT with a
// BadRequest of every violation, in order, as the validation interceptor
// answers; anything else is INTERNAL.
func TestSpecError(t *testing.T) {
	t.Parallel()
	var v jobspec.Violations
	v.Add("pipeline", "unknown pipeline %q", "nope")
	v.Add("params", "at most %d entries", 64)
	st := status.Convert(server.SpecError(v.Err()))
	require.Equal(t, codes.InvalidArgument, st.Code())
	require.Equal(t, `invalid request: pipeline: unknown pipeline "nope" (and 1 more)`, st.Message())
	require.Len(t, st.Details(), 1)
	br, ok := st.Details()[0].(*errdetails.BadRequest)
	require.True(t, ok, "%T", st.Details()[0])
	require.Len(t, br.GetFieldViolations(), 2)
	require.Equal(t, "pipeline", br.GetFieldViolations()[0].GetField())
	require.Equal(t, `unknown pipeline "nope"`, br.GetFieldViolations()[0].GetDescription())
	require.Equal(t, "params", br.GetFieldViolations()[1].GetField())
	require.Equal(t, "at most 64 entries", br.GetFieldViolations()[1].GetDescription())

	require.Equal(t, codes.Internal, status.Code(server.SpecError(errors.New("boom"))))
	require.Equal(t, codes.Internal, status.Code(server.SpecError(&jobspec.Error{})), "an Error of no violation is not a request's fault")
}
