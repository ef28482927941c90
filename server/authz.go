package server

import (
	"context"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// submitterMethods are what a submitter key may call: submit, read, list
// and watch its tenant's work. Every other method of the API — cancel,
// replay, resolve, approve, the delivery RPCs, a run's retry and cancel,
// schedule changes — needs an operator key, so a method added later is an
// operator's until it is listed here.
var submitterMethods = map[string]bool{
	oncejobv1.JobService_SubmitJob_FullMethodName:          true,
	oncejobv1.JobService_SubmitJobs_FullMethodName:         true,
	oncejobv1.JobService_GetJob_FullMethodName:             true,
	oncejobv1.JobService_ListJobs_FullMethodName:           true,
	oncejobv1.JobService_CountJobs_FullMethodName:          true,
	oncejobv1.JobService_WatchJob_FullMethodName:           true,
	oncejobv1.JobService_WatchJobs_FullMethodName:          true,
	oncejobv1.RunService_CreateRun_FullMethodName:          true,
	oncejobv1.RunService_GetRun_FullMethodName:             true,
	oncejobv1.RunService_ListRuns_FullMethodName:           true,
	oncejobv1.RunService_WatchRun_FullMethodName:           true,
	oncejobv1.RunService_ListRunBatches_FullMethodName:     true,
	oncejobv1.ScheduleService_ListSchedules_FullMethodName: true,
	oncejobv1.ScheduleService_GetSchedule_FullMethodName:   true,
}

// ReasonRoleNotPermitted is the ErrorInfo reason of a call the key's role
// may not make.
const ReasonRoleNotPermitted = "ROLE_NOT_PERMITTED"

// requiredRole is the role method needs.
func requiredRole(method string) store.Role {
	if submitterMethods[method] {
		return store.RoleSubmitter
	}
	return store.RoleOperator
}

// authorize refuses a call the caller's role may not make, with
// PERMISSION_DENIED and an ErrorInfo naming both roles; it logs an audit
// line for every operator call it lets through.
func authorize(ctx context.Context, method string, logger *slog.Logger) error {
	p, _ := tenant.PrincipalFromContext(ctx)
	need := requiredRole(method)
	if need == store.RoleSubmitter || p.Role == store.RoleOperator {
		if need == store.RoleOperator {
			logger.InfoContext(ctx, "audit", "tenant", p.Tenant, "key", p.KeyPrefix, "role", string(p.Role), "rpc", method)
		}
		return nil
	}
	st, _ := status.Newf(codes.PermissionDenied, "%s needs an operator key; key %s is a %s key", method, p.KeyPrefix, p.Role).
		WithDetails(&errdetails.ErrorInfo{Reason: ReasonRoleNotPermitted, Domain: errorDomain, Metadata: map[string]string{
			"method": method, "role": string(p.Role), "required_role": string(need), "key": p.KeyPrefix,
		}})
	return st.Err()
}

func authzUnaryInterceptor(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := authorize(ctx, info.FullMethod, logger); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

func authzStreamInterceptor(logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := authorize(ss.Context(), info.FullMethod, logger); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// actor is the caller of an operator RPC, for the audit record its event
// carries.
func actor(ctx context.Context) *store.Actor {
	p, ok := tenant.PrincipalFromContext(ctx)
	if !ok {
		return nil
	}
	method, _ := grpc.Method(ctx)
	return &store.Actor{KeyPrefix: p.KeyPrefix, Role: p.Role, RPC: method}
}
