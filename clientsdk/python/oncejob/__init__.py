"""oncejob: the Python client of the oncejob service.

    from oncejob import Client
    with Client("127.0.0.1:7070") as c:
        res = c.submit("summarize", "Invoice 42: 3 licences, EUR 1,200.")
        job = c.wait(res.job.id)

One key per intent: submit sends the caller's key or submit_key(...) of the
request on every retry, so there is one job however often it is retried.
Retries: UNAVAILABLE, RESOURCE_EXHAUSTED (after a RetryInfo's delay),
DEADLINE_EXCEEDED and broken connections, with exponential backoff and full
jitter, bounded by attempts and the call's deadline. watch resumes a broken
stream from the last event it yielded, on any replica.
"""
from . import _details  # first: it makes google.rpc importable for .v1
from ._core import ItemResult, SubmitResult, run_key
from .aio import AsyncClient
from .client import Client
from .errors import (BudgetSpentError, FieldViolation, InvalidRequestError, KeyReusedError, NotFoundError,
                     OncejobError, PreconditionError)
from .retry import RetryEvent, RetryPolicy
from .v1 import job_pb2
from .urls import normalize_url
from .workid import canonical_json, submit_key, work_id

__all__ = [
    "Client", "AsyncClient", "SubmitResult", "RetryPolicy", "RetryEvent",
    "OncejobError", "NotFoundError", "KeyReusedError", "PreconditionError", "InvalidRequestError",
    "BudgetSpentError", "FieldViolation", "work_id", "submit_key", "canonical_json", "job_pb2",
    "normalize_url", "ItemResult", "run_key",
]
