"""What the sync and asyncio clients share: channel targets, requests, and
the bookkeeping of retries and reconnects (the loops themselves differ only
in how they sleep)."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Optional

import grpc

from .errors import BudgetSpentError, OncejobError, decode
from .retry import RetryPolicy, retryable
from .v1 import job_pb2, run_pb2
from .workid import submit_key, work_id

DEFAULT_ADDR = "127.0.0.1:7070"


@dataclass(frozen=True)
class SubmitResult:
    """What submit did. replayed: the key was seen before and job is the
    one the first submission created (outcome EXISTING)."""
    job: job_pb2.Job
    outcome: int
    key: str

    @property
    def replayed(self) -> bool:
        return self.outcome == job_pb2.SUBMIT_OUTCOME_EXISTING

    @property
    def deduplicated(self) -> bool:
        """The job took its result from an identical computation that
        already existed (same document, pipeline, prompt and model, under
        another key): no new generation ran; job.deduplicated_from names
        the job that computed it. A replay of such a job says so too."""
        return bool(self.job.deduplicated_from)


def target(addr: str) -> str:
    """A comma-separated list of IPv4 host:port addresses names replicas
    (gRPC's "ipv4:" target); anything else is passed to gRPC as is."""
    if "," in addr and ":" in addr and not addr.startswith(("ipv4:", "ipv6:", "dns:", "unix:")) and "://" not in addr:
        return "ipv4:" + addr
    return addr


def channel_options(user_agent: Optional[str]) -> list:
    ua = f"{user_agent} oncejob-python" if user_agent else "oncejob-python"
    # Watches are long and may be quiet: ping an idle connection so a NAT or
    # load balancer does not drop it (the server allows pings every 10s+).
    return [("grpc.primary_user_agent", ua), ("grpc.keepalive_time_ms", 30000), ("grpc.keepalive_timeout_ms", 10000)]


def credentials(tls, root_certificates, private_key, certificate_chain):
    """Channel credentials, or None for plaintext."""
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    if tls or root_certificates or certificate_chain:
        return grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
    return None


def submit_request(pipeline, document, media_type, name, params, labels, model_profile, key):
    """The request, and its key: the caller's or submit_key's."""
    doc = job_pb2.Document(media_type=media_type, name=name)
    if isinstance(document, str):
        doc.text = document
    else:
        doc.data = bytes(document)
    req = job_pb2.SubmitJobRequest(pipeline=pipeline, document=doc, labels=labels or {}, model_profile=model_profile)
    if params:
        req.params.update(params)
    if not key:
        key = submit_key(pipeline, document, media_type=media_type, name=name, model_profile=model_profile, params=params)
    return req, key


def operator_key(key: Optional[str]) -> str:
    """The caller's key, or one made once for this call (never per attempt)."""
    return key or f"oncejob-op-{uuid.uuid4()}"


def metadata(base: tuple, key: Optional[str]) -> tuple:
    return base + ((("idempotency-key", key),) if key else ())


class Budget:
    """The retries of one unary call: attempts and the deadline."""

    def __init__(self, policy: RetryPolicy, timeout: Optional[float], key: str = ""):
        self.policy, self.key, self.attempts = policy, key, 0
        self.deadline = time.monotonic() + timeout if timeout else None

    def attempt_timeout(self) -> Optional[float]:
        """The timeout of the next attempt; counts it."""
        self.attempts += 1
        t = None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)
        if self.policy.attempt_timeout:
            t = self.policy.attempt_timeout if t is None else min(t, self.policy.attempt_timeout)
        return t

    def after_failure(self, err: grpc.RpcError) -> tuple[float, Optional[OncejobError]]:
        """How long to sleep, and the error to raise after sleeping (None:
        try again). A wait that would pass the deadline is cut at it."""
        past = self.deadline is not None and time.monotonic() >= self.deadline
        if past and self.attempts > 1:
            return 0.0, BudgetSpentError(self.attempts, decode(err, self.key), True)
        if past or not retryable(err):
            return 0.0, decode(err, self.key)
        if self.attempts >= self.policy.max_attempts:
            return 0.0, BudgetSpentError(self.attempts, decode(err, self.key), False)
        wait = self.policy.wait(self.attempts, err)
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            return max(self.deadline - time.monotonic(), 0.0), BudgetSpentError(self.attempts, decode(err, self.key), True)
        return wait, None


class Reconnects:
    """The reconnects of one watch: consecutive failures with no event
    between, and the watch's deadline."""

    def __init__(self, policy: RetryPolicy, timeout: Optional[float]):
        self.policy, self.failures = policy, 0
        self.deadline = time.monotonic() + timeout if timeout else None

    def stream_timeout(self) -> Optional[float]:
        return None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)

    def after_failure(self, err: grpc.RpcError, progress: bool) -> tuple[float, Optional[OncejobError]]:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return 0.0, BudgetSpentError(self.failures + 1, decode(err), True)
        if not retryable(err):
            return 0.0, decode(err)
        self.failures = 1 if progress else self.failures + 1
        if self.failures >= self.policy.max_attempts:
            return 0.0, BudgetSpentError(self.failures, decode(err), False)
        wait = self.policy.wait(self.failures, err)
        if self.deadline is not None:
            wait = min(wait, max(self.deadline - time.monotonic(), 0.0))
        return wait, None


TERMINAL = {job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED, job_pb2.JOB_STATUS_DEAD_LETTERED}


MAX_BATCH = 1000
"""The most items one SubmitJobs call takes; submit_many splits larger lists."""

_CODES = {c.value[0]: c for c in grpc.StatusCode}


@dataclass(frozen=True)
class ItemResult:
    """submit_many's answer to one item: job and outcome, or error (typed
    like a call's). key is the key the item was sent with;
    already_in_run: the item was in the run before this call."""
    key: str
    job: Optional[job_pb2.Job]
    outcome: int
    already_in_run: bool
    error: Optional[OncejobError]


class _ItemStatus:
    """A SubmitJobs item's google.rpc.Status, shaped as a failed call for
    errors.decode."""

    def __init__(self, status):
        self._status = status

    def code(self):
        return _CODES.get(self._status.code, grpc.StatusCode.UNKNOWN)

    def details(self):
        return self._status.message

    def trailing_metadata(self):
        return (("grpc-status-details-bin", self._status.SerializeToString()),)


def submit_items(items) -> list:
    """The SubmitJobsItems of submit_many's items (dicts: document,
    pipeline, media_type, name, params, labels, model_profile, key), each
    with its key fixed once: the item's, or submit_key of its request."""
    out = []
    for it in items:
        req, key = submit_request(it.get("pipeline", ""), it["document"], it.get("media_type", ""), it.get("name", ""),
                                  it.get("params"), it.get("labels"), it.get("model_profile", ""), it.get("key"))
        out.append(job_pb2.SubmitJobsItem(idempotency_key=key, request=req))
    return out


def item_results(batch, resp) -> list:
    return [ItemResult(item.idempotency_key, r.job if r.HasField("job") else None, r.outcome, r.already_in_run,
                       decode(_ItemStatus(r.error), item.idempotency_key) if r.HasField("error") else None)
            for item, r in zip(batch, resp.results)]


def run_key(name: str, pipeline: str = "", model_profile: str = "", params: Optional[dict] = None,
            labels: Optional[dict] = None, provider_batch: bool = False) -> str:
    """The key of a CreateRun request: the Go SDK's RunKey, so the same run
    asked for again with the same name and defaults is the same run (and
    with provider_batch another run)."""
    fields = {"name": name, "pipeline": pipeline, "model_profile": model_profile,
              "params": params or {}, "labels": labels or {}}
    if provider_batch:  # absent when false, as in the Go SDK
        fields["provider_batch"] = True
    return work_id("oncejob.run", 1, fields)


def create_run_request(name, pipeline, model_profile, params, labels, provider_batch=False):
    req = run_pb2.CreateRunRequest(name=name, pipeline=pipeline, model_profile=model_profile, labels=labels or {},
                                   provider_batch=provider_batch)
    if params:
        req.params.update(params)
    return req
