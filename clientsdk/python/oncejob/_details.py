"""google.rpc details of a gRPC status (ErrorInfo, BadRequest, RetryInfo)."""
from __future__ import annotations

try:  # googleapis-common-protos, where installed
    from google.rpc import error_details_pb2, status_pb2
except ImportError:  # the copy `make generate` makes from the Go module's descriptors
    import sys
    import types

    from ._rpc import error_details_pb2, status_pb2

    # The generated API (v1/job_pb2: SubmitJobs answers items with a
    # google.rpc.Status) imports google.rpc.status_pb2 by that name: it gets
    # this copy, so one descriptor of google/rpc/status.proto is loaded.
    _google_rpc = sys.modules.setdefault("google.rpc", types.ModuleType("google.rpc"))
    _google_rpc.status_pb2 = status_pb2
    _google_rpc.error_details_pb2 = error_details_pb2
    sys.modules.setdefault("google.rpc.status_pb2", status_pb2)
    sys.modules.setdefault("google.rpc.error_details_pb2", error_details_pb2)

_KNOWN = (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RetryInfo,
          error_details_pb2.PreconditionFailure)


def details_of(err) -> list:
    """The known detail messages of a failed call (grpc.RpcError or aio error)."""
    try:
        trailers = err.trailing_metadata() or ()
    except Exception:  # an error raised before the call had trailers
        return []
    for k, v in trailers:
        if k == "grpc-status-details-bin":
            out = []
            for any_msg in status_pb2.Status.FromString(v).details:
                for cls in _KNOWN:
                    if any_msg.Is(cls.DESCRIPTOR):
                        m = cls()
                        any_msg.Unpack(m)
                        out.append(m)
            return out
    return []


def retry_delay(details: list) -> float | None:
    """The RetryInfo delay in seconds, if the server sent one."""
    for d in details:
        if isinstance(d, error_details_pb2.RetryInfo) and d.HasField("retry_delay"):
            return max(d.retry_delay.ToTimedelta().total_seconds(), 0.0)
    return None
