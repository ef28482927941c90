package requestid_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/oncejob/oncejob/server/requestid"
)

// headerStream records the headers a handler sets, as a server transport
// would send them.
type headerStream struct {
	grpc.ServerTransportStream
	header metadata.MD
}

func (s *headerStream) Method() string { return "/test/Method" }

func (s *headerStream) SetHeader(md metadata.MD) error {
	s.header = metadata.Join(s.header, md)
	return nil
}

// call runs the unary interceptor on a request carrying ids (none when
// empty) and returns the id the handler saw and the header sent back.
func call(t *testing.T, ids ...string) (seen string, header metadata.MD) {
	t.Helper()
	stream := &headerStream{}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), stream)
	if len(ids) > 0 {
		md := metadata.MD{}
		md.Append(requestid.MetadataKey, ids...)
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	_, err := requestid.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		seen = requestid.FromContext(ctx)
		return nil, nil
	})
	require.NoError(t, err)
	return seen, stream.header
}

func TestUnaryServerInterceptor(t *testing.T) {
	t.Parallel()

	t.Run("KeepsASaneClientID", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"req-42", "a", strings.Repeat("x", 128), "~!{}"} {
			seen, header := call(t, id)
			require.Equal(t, id, seen)
			require.Equal(t, []string{id}, header.Get(requestid.MetadataKey), "echoed in the response header")
		}
	})

	t.Run("ReplacesAMissingOrUnsafeID", func(t *testing.T) {
		t.Parallel()
		for _, ids := range [][]string{
			nil,
			{""},
			{strings.Repeat("x", 129)},
			{"with space"},
			{"new\nline: injected log entry"},
			{"é"},
		} {
			seen, header := call(t, ids...)
			_, err := uuid.Parse(seen)
			require.NoError(t, err, "ids %q: a fresh uuid, got %q", ids, seen)
			require.Equal(t, []string{seen}, header.Get(requestid.MetadataKey))
		}
		a, _ := call(t)
		b, _ := call(t)
		require.NotEqual(t, a, b, "every RPC gets its own id")
	})

	t.Run("FirstValueWins", func(t *testing.T) {
		t.Parallel()
		seen, _ := call(t, "first", "second")
		require.Equal(t, "first", seen)
	})
}

func TestFromContextWithoutID(t *testing.T) {
	t.Parallel()
	require.Empty(t, requestid.FromContext(context.Background()))
}
