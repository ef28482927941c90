"""The asyncio client, on grpc.aio; the same behaviour as Client."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, Optional

import grpc
import grpc.aio

from . import _core
from ._core import Budget, Reconnects, SubmitResult
from .retry import RetryPolicy
from .v1 import job_pb2, job_pb2_grpc, run_pb2, run_pb2_grpc

__all__ = ["AsyncClient"]


class AsyncClient:
    """Client's asyncio twin; use `async with AsyncClient(...) as c:`."""

    def __init__(self, addr: str = _core.DEFAULT_ADDR, *, api_key: Optional[str] = None, tls=False,
                 root_certificates: Optional[bytes] = None, private_key: Optional[bytes] = None,
                 certificate_chain: Optional[bytes] = None, user_agent: Optional[str] = None,
                 timeout: Optional[float] = 30.0, retry: Optional[RetryPolicy] = None,
                 channel: Optional[grpc.aio.Channel] = None):
        self._owned = channel is None
        if channel is None:
            creds = _core.credentials(tls, root_certificates, private_key, certificate_chain)
            opts = _core.channel_options(user_agent)
            t = _core.target(addr)
            channel = grpc.aio.secure_channel(t, creds, opts) if creds else grpc.aio.insecure_channel(t, opts)
        self._channel = channel
        self._stub = job_pb2_grpc.JobServiceStub(channel)
        self._runs = run_pb2_grpc.RunServiceStub(channel)
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        self._timeout = timeout
        self._retry = retry or RetryPolicy()

    async def close(self) -> None:
        if self._owned:
            await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _unary(self, method, request, key: str = "", timeout: Optional[float] = None):
        budget = Budget(self._retry, self._timeout if timeout is None else timeout, key)
        md = _core.metadata(self._metadata, key)
        while True:
            try:
                return await method(request, timeout=budget.attempt_timeout(), metadata=md)
            except grpc.RpcError as err:
                wait, final = budget.after_failure(err)
                await asyncio.sleep(wait)
                if final is not None:
                    raise final from err

    async def submit(self, pipeline: str, document, *, media_type: str = "", name: str = "",
                     params: Optional[dict] = None, labels: Optional[dict] = None, model_profile: str = "",
                     key: Optional[str] = None, timeout: Optional[float] = None) -> SubmitResult:
        """As Client.submit."""
        req, key = _core.submit_request(pipeline, document, media_type, name, params, labels, model_profile, key)
        resp = await self._unary(self._stub.SubmitJob, req, key, timeout)
        return SubmitResult(resp.job, resp.outcome, key)

    async def get(self, job_id: str, *, timeout: Optional[float] = None) -> job_pb2.Job:
        return (await self._unary(self._stub.GetJob, job_pb2.GetJobRequest(job_id=job_id), timeout=timeout)).job

    async def list(self, *, status: int = 0, pipeline: str = "", page_size: int = 0) -> AsyncIterator[job_pb2.Job]:
        req = job_pb2.ListJobsRequest(status=status, pipeline=pipeline, page_size=page_size)
        while True:
            page = await self._unary(self._stub.ListJobs, req)
            for j in page.jobs:
                yield j
            if not page.next_page_token:
                return
            req.page_token = page.next_page_token

    async def cancel(self, job_id: str, *, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        req = job_pb2.CancelJobRequest(job_id=job_id, reason=reason)
        return (await self._unary(self._stub.CancelJob, req, _core.operator_key(key))).job

    async def replay(self, job_id: str, *, from_stage: int = 0, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        req = job_pb2.ReplayJobRequest(job_id=job_id, from_stage=from_stage, reason=reason)
        return (await self._unary(self._stub.ReplayJob, req, _core.operator_key(key))).job

    async def resolve(self, job_id: str, *, retry: bool, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        resolution = job_pb2.RESOLUTION_RETRY if retry else job_pb2.RESOLUTION_FAIL
        req = job_pb2.ResolveJobRequest(job_id=job_id, resolution=resolution, reason=reason)
        return (await self._unary(self._stub.ResolveJob, req, _core.operator_key(key))).job

    async def approve(self, job_id: str, *, approve: bool = True, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        req = job_pb2.ApproveJobRequest(job_id=job_id, approve=approve, reason=reason)
        return (await self._unary(self._stub.ApproveJob, req, _core.operator_key(key))).job

    async def submit_many(self, items, *, run_id: str = "", batch_size: int = _core.MAX_BATCH,
                          timeout: Optional[float] = None) -> list:
        """As Client.submit_many."""
        batch_size = max(1, min(batch_size, _core.MAX_BATCH))
        reqs = _core.submit_items(items)
        out = []
        for i in range(0, len(reqs), batch_size):
            batch = reqs[i:i + batch_size]
            resp = await self._unary(self._stub.SubmitJobs, job_pb2.SubmitJobsRequest(items=batch, run_id=run_id), timeout=timeout)
            out.extend(_core.item_results(batch, resp))
        return out

    async def create_run(self, name: str, *, pipeline: str = "", model_profile: str = "", params: Optional[dict] = None,
                         labels: Optional[dict] = None, key: Optional[str] = None,
                         provider_batch: bool = False) -> run_pb2.Run:
        """As Client.create_run."""
        req = _core.create_run_request(name, pipeline, model_profile, params, labels, provider_batch)
        key = key or _core.run_key(name, pipeline, model_profile, params, labels, provider_batch)
        return (await self._unary(self._runs.CreateRun, req, key)).run

    async def get_run(self, run_id: str) -> run_pb2.Run:
        return (await self._unary(self._runs.GetRun, run_pb2.GetRunRequest(run_id=run_id))).run

    async def list_run_batches(self, run_id: str) -> list:
        """As Client.list_run_batches."""
        return list((await self._unary(self._runs.ListRunBatches, run_pb2.ListRunBatchesRequest(run_id=run_id))).batches)

    async def retry_run_failures(self, run_id: str, *, reason: str = "", key: Optional[str] = None) -> run_pb2.RetryRunFailuresResponse:
        """As Client.retry_run_failures."""
        req = run_pb2.RetryRunFailuresRequest(run_id=run_id, reason=reason)
        return await self._unary(self._runs.RetryRunFailures, req, _core.operator_key(key))

    async def cancel_run(self, run_id: str, *, reason: str = "") -> run_pb2.CancelRunResponse:
        return await self._unary(self._runs.CancelRun, run_pb2.CancelRunRequest(run_id=run_id, reason=reason))

    async def watch_run(self, run_id: str, *, after_seq: int = 0, timeout: Optional[float] = None) -> AsyncIterator[run_pb2.Run]:
        """As Client.watch_run."""
        last = after_seq

        def open_stream(t):
            return self._runs.WatchRun(run_pb2.WatchRunRequest(run_id=run_id, after_seq=last), metadata=self._metadata, timeout=t)

        async for resp in self._resuming(open_stream, timeout):
            if resp.run.progress.seq > last:
                last = resp.run.progress.seq
                yield resp.run

    async def watch(self, job_id: str, *, after_seq: int = 0, timeout: Optional[float] = None) -> AsyncIterator[job_pb2.JobEvent]:
        """As Client.watch."""
        last = after_seq

        def open_stream(t):
            return self._stub.WatchJob(job_pb2.WatchJobRequest(job_id=job_id, after_seq=last),
                                       metadata=self._metadata, timeout=t)

        async for resp in self._resuming(open_stream, timeout):
            if resp.event.seq > last:
                last = resp.event.seq
                yield resp.event

    async def watch_jobs(self, *, status: int = 0, pipeline: str = "", after_cursor: str = "",
                         timeout: Optional[float] = None) -> AsyncIterator[job_pb2.WatchJobsResponse]:
        """As Client.watch_jobs."""
        cursor = after_cursor

        def open_stream(t):
            req = job_pb2.WatchJobsRequest(status=status, pipeline=pipeline, after_cursor=cursor)
            return self._stub.WatchJobs(req, metadata=self._metadata, timeout=t)

        async for change in self._resuming(open_stream, timeout):
            cursor = change.cursor
            yield change

    async def _resuming(self, open_stream, timeout: Optional[float]):
        """As Client._resuming."""
        reconnects = Reconnects(self._retry, timeout)
        while True:
            call = open_stream(reconnects.stream_timeout())
            progress = False
            try:
                async for item in call:
                    progress = True
                    yield item
                return
            except grpc.RpcError as err:
                wait, final = reconnects.after_failure(err, progress)
                if final is not None:
                    raise final from err
                await asyncio.sleep(wait)
            finally:
                call.cancel()

    async def wait(self, job_id: str, *, timeout: Optional[float] = None) -> job_pb2.Job:
        """As Client.wait."""
        async for _ in self.watch(job_id, timeout=timeout):
            pass
        return await self.get(job_id)
