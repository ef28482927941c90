package idempotency

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/tenant"
)

func TestInterceptorValidatesAndScopesKeys(t *testing.T) {
	t.Parallel()
	const method = "/oncejob.v1.JobService/SubmitJob"
	intercept := UnaryServerInterceptor(method)
	info := &grpc.UnaryServerInfo{FullMethod: method}

	call := func(md metadata.MD, fullMethod string) (Key, error) {
		ctx := tenant.NewContext(metadata.NewIncomingContext(context.Background(), md), "acme")
		var got Key
		_, err := intercept(ctx, nil, &grpc.UnaryServerInfo{FullMethod: fullMethod}, func(ctx context.Context, _ any) (any, error) {
			got, _ = FromContext(ctx)
			return nil, nil
		})
		return got, err
	}

	for name, md := range map[string]metadata.MD{
		"missing":   {},
		"empty":     {MetadataKey: {""}},
		"too long":  {MetadataKey: {strings.Repeat("k", 256)}},
		"non-ascii": {MetadataKey: {"clé"}},
		"control":   {MetadataKey: {"a\tb"}},
		"twice":     {MetadataKey: {"a", "b"}},
	} {
		_, err := call(md, info.FullMethod)
		require.Equal(t, codes.InvalidArgument, status.Code(err), name)
	}

	got, err := call(metadata.MD{MetadataKey: {"order 17/v2"}}, method)
	require.NoError(t, err)
	require.Equal(t, Key{Tenant: "acme", Method: method, Value: "order 17/v2"}, got)

	// Optional elsewhere, but validated when sent.
	got, err = call(metadata.MD{}, "/oncejob.v1.JobService/GetJob")
	require.NoError(t, err)
	require.Equal(t, Key{}, got)
	_, err = call(metadata.MD{MetadataKey: {"clé"}}, "/oncejob.v1.JobService/GetJob")
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}
