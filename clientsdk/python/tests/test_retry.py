"""Retries, RetryInfo, deadlines and errors against a scripted gRPC server
in this process (the real server does not send RESOURCE_EXHAUSTED)."""
import asyncio
import threading
import time
from concurrent import futures

import grpc
import pytest
from google.protobuf import duration_pb2

from oncejob import (AsyncClient, BudgetSpentError, Client, InvalidRequestError, KeyReusedError, NotFoundError,
                     PreconditionError, RetryPolicy)
from oncejob._rpc import error_details_pb2, status_pb2
from oncejob.v1 import job_pb2, job_pb2_grpc


def status_with(code, message, *details):
    st = status_pb2.Status(code=code.value[0], message=message)
    for d in details:
        st.details.add().Pack(d)
    return st


class Scripted(job_pb2_grpc.JobServiceServicer):
    """Answers SubmitJob with script(n) for the n-th attempt (from 1): a
    response, or a google.rpc Status to fail with. Records attempts."""

    def __init__(self, script):
        self.script = script
        self.attempts = []  # (monotonic time, idempotency key)
        self.lock = threading.Lock()

    def SubmitJob(self, request, context):
        key = dict(context.invocation_metadata()).get("idempotency-key")
        with self.lock:
            self.attempts.append((time.monotonic(), key))
            n = len(self.attempts)
        out = self.script(n)
        if isinstance(out, status_pb2.Status):
            context.set_trailing_metadata((("grpc-status-details-bin", out.SerializeToString()),))
            context.abort(grpc.StatusCode(next(c for c in grpc.StatusCode if c.value[0] == out.code)), out.message)
        return out


@pytest.fixture
def serve():
    servers = []

    def start(script):
        svc = Scripted(script)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        job_pb2_grpc.add_JobServiceServicer_to_server(svc, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return svc, f"127.0.0.1:{port}"

    yield start
    for s in servers:
        s.stop(None)


def created():
    return job_pb2.SubmitJobResponse(job=job_pb2.Job(id="job-1"), outcome=job_pb2.SUBMIT_OUTCOME_CREATED)


def exhausted(seconds):
    delay = duration_pb2.Duration()
    delay.FromNanoseconds(int(seconds * 1e9))
    return status_with(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", error_details_pb2.RetryInfo(retry_delay=delay))


def test_retry_info_is_waited_out(serve):
    svc, addr = serve(lambda n: exhausted(0.3) if n <= 2 else created())
    waits = []
    with Client(addr, retry=RetryPolicy(on_retry=lambda e: waits.append(e.wait))) as c:
        res = c.submit("summarize", "hello")
    assert res.job.id == "job-1"
    assert waits == [0.3, 0.3], "the server's delay, not the backoff's"
    assert len(svc.attempts) == 3
    assert {k for _, k in svc.attempts} == {res.key}, "one key for every attempt"
    for (t0, _), (t1, _) in zip(svc.attempts, svc.attempts[1:]):
        assert t1 - t0 >= 0.3


def test_deadline_shorter_than_budget_ends_at_deadline(serve):
    svc, addr = serve(lambda n: exhausted(3600))
    with Client(addr) as c:
        start = time.monotonic()
        with pytest.raises(BudgetSpentError) as err:
            c.submit("summarize", "hello", timeout=0.2)
        took = time.monotonic() - start
    assert err.value.deadline
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert err.value.attempts == 1
    assert err.value.last.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert took >= 0.2, "the call ended before its deadline"
    assert took < 60, "the hour-long wait was not cut at the deadline"
    assert len(svc.attempts) == 1


def test_backoff_is_exponential_with_full_jitter(serve):
    unavailable = status_with(grpc.StatusCode.UNAVAILABLE, "down")
    svc, addr = serve(lambda n: unavailable)
    waits = []
    policy = RetryPolicy(max_attempts=5, initial_backoff=0.04, max_backoff=0.2, jitter=lambda: 1.0,
                         on_retry=lambda e: waits.append(e.wait))
    with Client(addr, retry=policy) as c:
        with pytest.raises(BudgetSpentError) as err:
            c.submit("summarize", "hello")
    assert not err.value.deadline and err.value.attempts == 5
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert waits == pytest.approx([0.04, 0.08, 0.16, 0.2])
    times = [t for t, _ in svc.attempts]
    assert len(times) == 5
    for i, w in enumerate(waits):
        assert times[i + 1] - times[i] >= w

    # Unpinned, each wait is below its cap.
    waits.clear()
    with Client(addr, retry=RetryPolicy(max_attempts=8, initial_backoff=0.01, max_backoff=0.04,
                                        on_retry=lambda e: waits.append(e.wait))) as c:
        with pytest.raises(BudgetSpentError):
            c.submit("summarize", "hello")
    assert len(waits) == 7
    for i, w in enumerate(waits):
        assert 0 <= w < min(0.01 * 2 ** i, 0.04)


@pytest.mark.parametrize("status, check", [
    (status_with(grpc.StatusCode.INVALID_ARGUMENT, "reused",
                 error_details_pb2.ErrorInfo(reason="IDEMPOTENCY_KEY_REUSED", domain="oncejob.dev")),
     lambda e: isinstance(e, KeyReusedError) and e.key == "my-key"),
    (status_with(grpc.StatusCode.INVALID_ARGUMENT, "bad", error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field="pipeline", description="unknown")])),
     lambda e: isinstance(e, InvalidRequestError) and [(v.field, v.description) for v in e.violations] == [("pipeline", "unknown")]),
    (status_with(grpc.StatusCode.FAILED_PRECONDITION, "no", error_details_pb2.ErrorInfo(
        reason="JOB_STATUS_CONFLICT", metadata={"job_id": "j", "status": "JOB_STATUS_SUCCEEDED"})),
     lambda e: isinstance(e, PreconditionError) and e.job_id == "j" and e.job_status == "JOB_STATUS_SUCCEEDED"),
    (status_with(grpc.StatusCode.NOT_FOUND, "job x not found"), lambda e: isinstance(e, NotFoundError)),
], ids=["key reused", "invalid", "precondition", "not found"])
def test_errors_decode_and_are_not_retried(serve, status, check):
    svc, addr = serve(lambda n: status)
    with Client(addr) as c:
        with pytest.raises(Exception) as err:
            c.submit("summarize", "hello", key="my-key")
    assert check(err.value), repr(err.value)
    assert err.value.code.value[0] == status.code
    assert len(svc.attempts) == 1


def test_async_client_retries_with_one_key(serve):
    svc, addr = serve(lambda n: status_with(grpc.StatusCode.UNAVAILABLE, "down") if n <= 2 else created())

    async def run():
        async with AsyncClient(addr, retry=RetryPolicy(initial_backoff=0.01)) as c:
            return await c.submit("summarize", "hello")

    res = asyncio.run(run())
    assert res.job.id == "job-1"
    assert [k for _, k in svc.attempts] == [res.key] * 3


def test_async_deadline_ends_at_deadline(serve):
    svc, addr = serve(lambda n: exhausted(3600))

    async def run():
        async with AsyncClient(addr) as c:
            await c.submit("summarize", "hello", timeout=0.2)

    with pytest.raises(BudgetSpentError) as err:
        asyncio.run(run())
    assert err.value.deadline
