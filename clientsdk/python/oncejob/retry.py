"""Retry policy: exponential backoff with full jitter, RetryInfo honoured,
bounded by attempts and by the call's deadline (as the Go SDK's)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Optional

import grpc

from ._details import details_of, retry_delay

__all__ = ["RetryPolicy", "RetryEvent"]

_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED}


@dataclass(frozen=True)
class RetryEvent:
    attempt: int        # the attempt that failed, from 1
    error: Exception    # its error
    wait: float         # seconds before the next attempt


@dataclass
class RetryPolicy:
    """Bounds the retries of one call.

    The wait before retry n is uniform in [0, min(max_backoff,
    initial_backoff * multiplier**(n-1))) ("full jitter"), or exactly the
    delay of a google.rpc.RetryInfo the server sent. A wait that would pass
    the call's deadline is cut at it and the call ends there
    (BudgetSpentError with deadline=True).
    """
    max_attempts: int = 6             # every attempt, the first included; 1 turns retries off
    initial_backoff: float = 0.1      # seconds
    max_backoff: float = 5.0
    multiplier: float = 2.0
    attempt_timeout: Optional[float] = None  # bounds one attempt; None: the whole deadline
    jitter: Callable[[], float] = random.random  # fraction of the cap, in [0, 1)
    on_retry: Optional[Callable[[RetryEvent], None]] = None

    def wait(self, attempt: int, err: Exception) -> float:
        """Seconds to wait after failed attempt `attempt` (from 1)."""
        delay = retry_delay(details_of(err)) if isinstance(err, grpc.RpcError) else None
        if delay is None:
            ceiling = min(self.initial_backoff * self.multiplier ** (attempt - 1), self.max_backoff)
            delay = self.jitter() * ceiling
        if self.on_retry is not None:
            self.on_retry(RetryEvent(attempt, err, delay))
        return delay


def retryable(err: grpc.RpcError) -> bool:
    """Every call the SDK makes is read-only or carries an idempotency key
    fixed for the call, so an attempt whose outcome is unknown (a deadline,
    a broken connection) may be made again: it is a replay."""
    code = err.code()
    if code in _RETRYABLE:
        return True
    return code == grpc.StatusCode.INTERNAL and "RST_STREAM" in (err.details() or "")
