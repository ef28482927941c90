"""The synchronous client."""
from __future__ import annotations

import time
from typing import Iterator, Optional

import grpc

from . import _core
from ._core import Budget, Reconnects, SubmitResult
from .retry import RetryPolicy
from .v1 import job_pb2, job_pb2_grpc, run_pb2, run_pb2_grpc

__all__ = ["Client", "SubmitResult"]


class Client:
    """A client of one oncejob deployment; usable as a context manager.

    addr: "host:port", a comma-separated list of IPv4 replicas
    ("10.0.0.1:7070,10.0.0.2:7070"), or any gRPC target. tls: True for the
    system roots, or grpc.ChannelCredentials; root_certificates,
    private_key, certificate_chain: PEM bytes for a custom CA and a client
    certificate. timeout: seconds a unary call may take with all its
    retries (None: no bound). channel: an existing grpc.Channel instead.
    """

    def __init__(self, addr: str = _core.DEFAULT_ADDR, *, api_key: Optional[str] = None, tls=False,
                 root_certificates: Optional[bytes] = None, private_key: Optional[bytes] = None,
                 certificate_chain: Optional[bytes] = None, user_agent: Optional[str] = None,
                 timeout: Optional[float] = 30.0, retry: Optional[RetryPolicy] = None,
                 channel: Optional[grpc.Channel] = None):
        self._owned = channel is None
        if channel is None:
            creds = _core.credentials(tls, root_certificates, private_key, certificate_chain)
            opts = _core.channel_options(user_agent)
            t = _core.target(addr)
            channel = grpc.secure_channel(t, creds, opts) if creds else grpc.insecure_channel(t, opts)
        self._channel = channel
        self._stub = job_pb2_grpc.JobServiceStub(channel)
        self._runs = run_pb2_grpc.RunServiceStub(channel)
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        self._timeout = timeout
        self._retry = retry or RetryPolicy()

    def close(self) -> None:
        if self._owned:
            self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def stub(self) -> job_pb2_grpc.JobServiceStub:
        """The generated stub on the same channel, for what the SDK does not wrap (not retried)."""
        return self._stub

    def _unary(self, method, request, key: str = "", timeout: Optional[float] = None):
        budget = Budget(self._retry, self._timeout if timeout is None else timeout, key)
        md = _core.metadata(self._metadata, key)
        while True:
            try:
                return method(request, timeout=budget.attempt_timeout(), metadata=md)
            except grpc.RpcError as err:
                wait, final = budget.after_failure(err)
                time.sleep(wait)
                if final is not None:
                    raise final from err

    def submit(self, pipeline: str, document, *, media_type: str = "", name: str = "", params: Optional[dict] = None,
               labels: Optional[dict] = None, model_profile: str = "", key: Optional[str] = None,
               timeout: Optional[float] = None) -> SubmitResult:
        """Submits a job once. document: str (text) or bytes. The key is
        the caller's or submit_key(...) of the request, fixed before the
        first attempt and sent on every retry: there is one job however
        often the call is retried or the program re-run."""
        req, key = _core.submit_request(pipeline, document, media_type, name, params, labels, model_profile, key)
        resp = self._unary(self._stub.SubmitJob, req, key, timeout)
        return SubmitResult(resp.job, resp.outcome, key)

    def get(self, job_id: str, *, timeout: Optional[float] = None) -> job_pb2.Job:
        return self._unary(self._stub.GetJob, job_pb2.GetJobRequest(job_id=job_id), timeout=timeout).job

    def list(self, *, status: int = 0, pipeline: str = "", page_size: int = 0) -> Iterator[job_pb2.Job]:
        """Every job that matches, newest first, fetching pages as it goes."""
        req = job_pb2.ListJobsRequest(status=status, pipeline=pipeline, page_size=page_size)
        while True:
            page = self._unary(self._stub.ListJobs, req)
            yield from page.jobs
            if not page.next_page_token:
                return
            req.page_token = page.next_page_token

    def cancel(self, job_id: str, *, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        req = job_pb2.CancelJobRequest(job_id=job_id, reason=reason)
        return self._unary(self._stub.CancelJob, req, _core.operator_key(key)).job

    def replay(self, job_id: str, *, from_stage: int = 0, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        req = job_pb2.ReplayJobRequest(job_id=job_id, from_stage=from_stage, reason=reason)
        return self._unary(self._stub.ReplayJob, req, _core.operator_key(key)).job

    def resolve(self, job_id: str, *, retry: bool, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        resolution = job_pb2.RESOLUTION_RETRY if retry else job_pb2.RESOLUTION_FAIL
        req = job_pb2.ResolveJobRequest(job_id=job_id, resolution=resolution, reason=reason)
        return self._unary(self._stub.ResolveJob, req, _core.operator_key(key)).job

    def approve(self, job_id: str, *, approve: bool = True, reason: str = "", key: Optional[str] = None) -> job_pb2.Job:
        req = job_pb2.ApproveJobRequest(job_id=job_id, approve=approve, reason=reason)
        return self._unary(self._stub.ApproveJob, req, _core.operator_key(key)).job

    def submit_many(self, items, *, run_id: str = "", batch_size: int = _core.MAX_BATCH,
                    timeout: Optional[float] = None) -> list:
        """Submits items (dicts: document, and optionally pipeline,
        media_type, name, params, labels, model_profile, key) with SubmitJobs,
        in calls of at most batch_size (<= 1000), into the run run_id if
        given, and answers each item in order (ItemResult). Every item's key
        is fixed before the first call (its own, or submit_key of its
        request), and a failed call is retried with the same keys: a retry,
        or the program run again, never makes a second job."""
        batch_size = max(1, min(batch_size, _core.MAX_BATCH))
        reqs = _core.submit_items(items)
        out = []
        for i in range(0, len(reqs), batch_size):
            batch = reqs[i:i + batch_size]
            resp = self._unary(self._stub.SubmitJobs, job_pb2.SubmitJobsRequest(items=batch, run_id=run_id), timeout=timeout)
            out.extend(_core.item_results(batch, resp))
        return out

    def create_run(self, name: str, *, pipeline: str = "", model_profile: str = "", params: Optional[dict] = None,
                   labels: Optional[dict] = None, key: Optional[str] = None,
                   provider_batch: bool = False) -> run_pb2.Run:
        """Creates a run, or returns the one its key (the caller's, or
        run_key of the request) created. provider_batch sends the items'
        LLM calls through the provider's batch API (about half the price,
        answered within 24 h); a server whose provider has none refuses it
        with InvalidRequestError (reason PROVIDER_BATCH_UNSUPPORTED)."""
        req = _core.create_run_request(name, pipeline, model_profile, params, labels, provider_batch)
        key = key or _core.run_key(name, pipeline, model_profile, params, labels, provider_batch)
        return self._unary(self._runs.CreateRun, req, key).run

    def get_run(self, run_id: str) -> run_pb2.Run:
        return self._unary(self._runs.GetRun, run_pb2.GetRunRequest(run_id=run_id)).run

    def list_run_batches(self, run_id: str) -> list:
        """The provider batches the run's calls went into, oldest first
        (RunBatch: status, the run's lines, those answered, their cost)."""
        return list(self._unary(self._runs.ListRunBatches, run_pb2.ListRunBatchesRequest(run_id=run_id)).batches)

    def list_runs(self) -> Iterator[run_pb2.Run]:
        req = run_pb2.ListRunsRequest()
        while True:
            page = self._unary(self._runs.ListRuns, req)
            yield from page.runs
            if not page.next_page_token:
                return
            req.page_token = page.next_page_token

    def retry_run_failures(self, run_id: str, *, reason: str = "", key: Optional[str] = None) -> run_pb2.RetryRunFailuresResponse:
        """Replays every FAILED and DEAD_LETTERED job of the run from its
        checkpoint; the same key again replays nothing more."""
        req = run_pb2.RetryRunFailuresRequest(run_id=run_id, reason=reason)
        return self._unary(self._runs.RetryRunFailures, req, _core.operator_key(key))

    def cancel_run(self, run_id: str, *, reason: str = "") -> run_pb2.CancelRunResponse:
        return self._unary(self._runs.CancelRun, run_pb2.CancelRunRequest(run_id=run_id, reason=reason))

    def watch_run(self, run_id: str, *, after_seq: int = 0, timeout: Optional[float] = None) -> Iterator[run_pb2.Run]:
        """Snapshots of the run's progress, each with a larger seq, until
        every item is terminal; a broken stream resumes after the last seq."""
        last = after_seq

        def open_stream(t):
            return self._runs.WatchRun(run_pb2.WatchRunRequest(run_id=run_id, after_seq=last), metadata=self._metadata, timeout=t)

        for resp in self._resuming(open_stream, timeout):
            if resp.run.progress.seq > last:
                last = resp.run.progress.seq
                yield resp.run

    # Delivery RPCs (an outbox event's deliveries, retrying a dead delivery)
    # are wrapped here, like the operator calls, once the server has them.

    def watch(self, job_id: str, *, after_seq: int = 0, timeout: Optional[float] = None) -> Iterator[job_pb2.JobEvent]:
        """The job's events in seq order, each once, until its terminal
        event. A broken stream (a lost connection, a replica shutting down)
        is resumed after the last event yielded, on any replica."""
        last = after_seq

        def open_stream(t):
            return self._stub.WatchJob(job_pb2.WatchJobRequest(job_id=job_id, after_seq=last),
                                       metadata=self._metadata, timeout=t)

        for resp in self._resuming(open_stream, timeout):
            if resp.event.seq > last:  # the server never repeats; cheap insurance
                last = resp.event.seq
                yield resp.event

    def watch_jobs(self, *, status: int = 0, pipeline: str = "", after_cursor: str = "",
                   timeout: Optional[float] = None) -> Iterator[job_pb2.WatchJobsResponse]:
        """The changes of the caller's jobs from after_cursor on, each once,
        resumed from the last cursor after a broken stream. Never ends on
        its own."""
        cursor = after_cursor

        def open_stream(t):
            req = job_pb2.WatchJobsRequest(status=status, pipeline=pipeline, after_cursor=cursor)
            return self._stub.WatchJobs(req, metadata=self._metadata, timeout=t)

        for change in self._resuming(open_stream, timeout):
            cursor = change.cursor
            yield change

    def _resuming(self, open_stream, timeout: Optional[float]):
        """The items of open_stream(timeout), reopened after a resumable
        failure; open_stream reads the caller's position each time."""
        reconnects = Reconnects(self._retry, timeout)
        while True:
            call = open_stream(reconnects.stream_timeout())
            progress = False
            try:
                for item in call:
                    progress = True
                    yield item
                return
            except grpc.RpcError as err:
                wait, final = reconnects.after_failure(err, progress)
                if final is not None:
                    raise final from err
                time.sleep(wait)
            finally:
                call.cancel()

    def wait(self, job_id: str, *, timeout: Optional[float] = None) -> job_pb2.Job:
        """The job once it is terminal (SUCCEEDED, FAILED, CANCELLED,
        DEAD_LETTERED), with its output. A terminal status is not an error."""
        for _ in self.watch(job_id, timeout=timeout):
            pass
        return self.get(job_id)
