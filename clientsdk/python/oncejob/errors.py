"""Typed errors, decoded from gRPC statuses and their google.rpc details."""
from __future__ import annotations

from dataclasses import dataclass, field

import grpc

from ._details import details_of

__all__ = [
    "OncejobError", "NotFoundError", "KeyReusedError", "PreconditionError",
    "InvalidRequestError", "BudgetSpentError", "FieldViolation",
]


class OncejobError(Exception):
    """An error status from the server. code is a grpc.StatusCode."""

    def __init__(self, code: grpc.StatusCode, message: str, details: list | None = None):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.details = details or []


class NotFoundError(OncejobError):
    """The job does not exist for the caller (another tenant's does not either)."""


class KeyReusedError(OncejobError):
    """The idempotency key was used before for another request: use a new key."""

    def __init__(self, key: str, *args):
        super().__init__(*args)
        self.key = key


class PreconditionError(OncejobError):
    """The job's status does not allow the request; job_status is its name."""

    def __init__(self, job_id: str, job_status: str, *args):
        super().__init__(*args)
        self.job_id = job_id
        self.job_status = job_status


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


class InvalidRequestError(OncejobError):
    """INVALID_ARGUMENT: violations lists the bad fields; reason is the
    ErrorInfo reason when there is one (IDEMPOTENCY_KEY_INVALID)."""

    def __init__(self, violations: list[FieldViolation], reason: str, *args):
        super().__init__(*args)
        self.violations = violations
        self.reason = reason


class BudgetSpentError(OncejobError):
    """Retries stopped before the call succeeded: the attempts ran out, or
    the deadline came first (deadline=True, code DEADLINE_EXCEEDED). last is
    the last attempt's error."""

    def __init__(self, attempts: int, last: Exception, deadline: bool):
        code = grpc.StatusCode.DEADLINE_EXCEEDED if deadline else getattr(last, "code", grpc.StatusCode.UNKNOWN)
        why = "deadline reached" if deadline else "attempts spent"
        super().__init__(code, f"retry budget spent ({why} after {attempts} attempts): last error: {last}")
        self.attempts = attempts
        self.last = last
        self.deadline = deadline


def decode(err: grpc.RpcError, key: str = "") -> OncejobError:
    """Returns the typed error of a failed call."""
    code, message = err.code(), err.details() or ""
    details = details_of(err)
    info = next((d for d in details if type(d).__name__ == "ErrorInfo"), None)
    reason = info.reason if info is not None else ""
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(code, message, details)
    if code == grpc.StatusCode.INVALID_ARGUMENT and reason == "IDEMPOTENCY_KEY_REUSED":
        return KeyReusedError(key, code, message, details)
    if code == grpc.StatusCode.FAILED_PRECONDITION and reason == "JOB_STATUS_CONFLICT":
        return PreconditionError(info.metadata.get("job_id", ""), info.metadata.get("status", ""), code, message, details)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        violations = [FieldViolation(v.field, v.description)
                      for d in details if type(d).__name__ == "BadRequest" for v in d.field_violations]
        return InvalidRequestError(violations, reason, code, message, details)
    return OncejobError(code, message, details)
