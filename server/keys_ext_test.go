package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/watch"
)

// replica is one server process's worth: its own connection pool to the
// shared Postgres schema, its own watch hub and key cache.
type replica struct {
	store *storepg.Store
	conn  *grpc.ClientConn
	jobs  oncejobv1.JobServiceClient
}

// startReplica starts a server on its own store opened on url, with the
// keys file of the other tests (acme and globex, operators) beside the
// store's keys.
func startReplica(t *testing.T, url string) *replica {
	t.Helper()
	ctx := context.Background()
	st, err := storepg.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(fmt.Sprintf(
		"keys:\n  - tenant: globex\n    sha256: %s\n", tenant.HashKey(keyGlobex))), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))

	hub, err := watch.New(watch.Config{Store: st, Logger: logger, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	hubCtx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()
	t.Cleanup(func() { stopHub(); <-hubDone })

	s, err := server.New(server.Config{Store: st, Keys: keys, KeyStore: st, Logger: logger, Watch: hub})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(s.GRPC.Stop)
	t.Cleanup(hub.Shutdown)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &replica{store: st, conn: conn, jobs: oncejobv1.NewJobServiceClient(conn)}
}

// createKey makes a store key as `oncejob keys create` does and returns it.
func createKey(t *testing.T, st store.APIKeyStore, tenantName string, role store.Role) (key, prefix string) {
	t.Helper()
	key, id, prefix := tenant.NewStoreKey()
	_, err := st.APIKeyCreate(context.Background(), &store.APIKeyCreateParams{ID: id, Tenant: tenantName, Role: role, SHA256: tenant.HashKey(key)})
	require.NoError(t, err)
	return key, prefix
}

// Keys of `oncejob keys create`, on two replicas of one Postgres: a
// submitter submits and reads but is refused every operator RPC with
// PERMISSION_DENIED; an operator's cancel is recorded, with its key and
// role, on the event it appends; another tenant's job stays NOT_FOUND
// whatever the key; a revoked key is refused by both replicas within 5s
// (the cache holds a key for 1s).
func TestStoreKeysOnTwoReplicas(t *testing.T) {
	t.Parallel()
	url := storepgtest.NewMigratedSchemaURL(t)
	ctx := context.Background()
	r1, r2 := startReplica(t, url), startReplica(t, url)
	submitter, _ := createKey(t, r1.store, "acme", store.RoleSubmitter)
	operator, operatorPrefix := createKey(t, r2.store, "acme", store.RoleOperator)
	globexOperator, _ := createKey(t, r1.store, "globex", store.RoleOperator)

	// The submitter submits on one replica and reads on the other.
	sub, err := r1.jobs.SubmitJob(as(submitter, "keys-1"), submitReq("an invoice"))
	require.NoError(t, err)
	id := sub.GetJob().GetId()
	got, err := r2.jobs.GetJob(as(submitter, ""), &oncejobv1.GetJobRequest{JobId: id})
	require.NoError(t, err)
	require.Equal(t, id, got.GetJob().GetId())

	t.Run("ASubmitterIsRefusedEveryOperatorRPC", func(t *testing.T) {
		for name, call := range map[string]func() error{
			"CancelJob": func() error {
				_, err := r1.jobs.CancelJob(as(submitter, ""), &oncejobv1.CancelJobRequest{JobId: id})
				return err
			},
			"ReplayJob": func() error {
				_, err := r2.jobs.ReplayJob(as(submitter, "r-1"), &oncejobv1.ReplayJobRequest{JobId: id})
				return err
			},
			"ResolveJob": func() error {
				_, err := r1.jobs.ResolveJob(as(submitter, "s-1"), &oncejobv1.ResolveJobRequest{JobId: id, Resolution: oncejobv1.Resolution_RESOLUTION_FAIL})
				return err
			},
			"ApproveJob": func() error {
				_, err := r2.jobs.ApproveJob(as(submitter, "a-1"), &oncejobv1.ApproveJobRequest{JobId: id, Approve: true})
				return err
			},
			"ListDeliveries": func() error {
				_, err := oncejobv1.NewDeliveryServiceClient(r1.conn).ListDeliveries(as(submitter, ""), &oncejobv1.ListDeliveriesRequest{JobId: id})
				return err
			},
			"RetryRunFailures": func() error {
				_, err := oncejobv1.NewRunServiceClient(r1.conn).RetryRunFailures(as(submitter, "rr-1"), &oncejobv1.RetryRunFailuresRequest{RunId: id})
				return err
			},
		} {
			err := call()
			requireReason(t, err, codes.PermissionDenied, server.ReasonRoleNotPermitted)
			require.Contains(t, status.Convert(err).Message(), "operator", name)
		}
		j, err := r1.jobs.GetJob(as(submitter, ""), &oncejobv1.GetJobRequest{JobId: id})
		require.NoError(t, err)
		require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_QUEUED, j.GetJob().GetStatus(), "nothing was applied")
	})

	t.Run("AnotherTenantsJobIsNotFound", func(t *testing.T) {
		for _, key := range []string{globexOperator, keyGlobex} {
			_, err := r1.jobs.GetJob(as(key, ""), &oncejobv1.GetJobRequest{JobId: id})
			require.Equal(t, codes.NotFound, status.Code(err))
			_, err = r2.jobs.CancelJob(as(key, ""), &oncejobv1.CancelJobRequest{JobId: id})
			require.Equal(t, codes.NotFound, status.Code(err))
		}
	})

	t.Run("AnOperatorsCancelIsAuditedInTheJobsEvents", func(t *testing.T) {
		_, err := r2.jobs.CancelJob(as(operator, "cancel-1"), &oncejobv1.CancelJobRequest{JobId: id, Reason: "duplicate invoice"})
		require.NoError(t, err)
		stream, err := r1.jobs.WatchJob(as(submitter, ""), &oncejobv1.WatchJobRequest{JobId: id})
		require.NoError(t, err)
		var events []*oncejobv1.JobEvent
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			events = append(events, resp.GetEvent())
		}
		require.Len(t, events, 2)
		require.Nil(t, events[0].GetActor(), "the submission is no operator's")
		last := events[1]
		require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_CANCELLED, last.GetStatus())
		require.Equal(t, operatorPrefix, last.GetActor().GetKeyPrefix())
		require.Equal(t, "operator", last.GetActor().GetRole())
		require.Equal(t, oncejobv1.JobService_CancelJob_FullMethodName, last.GetActor().GetRpc())
	})

	t.Run("AWrongSecretOrUnknownKeyIsUnauthenticated", func(t *testing.T) {
		made, _, _ := tenant.NewStoreKey()
		forged := submitter[:len("ojk_")+12] + made[len("ojk_")+12:] // the submitter's id, another secret
		for _, key := range []string{made, forged, "ojk_short_x", "not-a-key"} {
			_, err := r1.jobs.GetJob(as(key, ""), &oncejobv1.GetJobRequest{JobId: id})
			require.Equal(t, codes.Unauthenticated, status.Code(err), "key %q", key)
		}
	})

	t.Run("ARevokedKeyIsRefusedOnBothReplicasWithin5s", func(t *testing.T) {
		for _, r := range []*replica{r1, r2} { // both replicas hold it in their caches
			_, err := r.jobs.GetJob(as(submitter, ""), &oncejobv1.GetJobRequest{JobId: id})
			require.NoError(t, err)
		}
		keyID, ok := tenant.ParseKeyID(submitter)
		require.True(t, ok)
		revoked := time.Now()
		_, err := r1.store.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: keyID})
		require.NoError(t, err)
		refused := func(r *replica) bool {
			_, err := r.jobs.GetJob(as(submitter, ""), &oncejobv1.GetJobRequest{JobId: id})
			return status.Code(err) == codes.Unauthenticated
		}
		// 5s is the promise; the cache TTL is 1s.
		require.Eventually(t, func() bool { return refused(r1) && refused(r2) }, 5*time.Second, 20*time.Millisecond)
		t.Logf("revoked key refused by both replicas %s after the revocation", time.Since(revoked).Round(time.Millisecond))
		_, err = r2.jobs.GetJob(as(operator, ""), &oncejobv1.GetJobRequest{JobId: id})
		require.NoError(t, err, "the tenant's other keys still work")
	})
}
