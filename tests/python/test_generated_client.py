"""The generated Python client against a running oncejob server.

Run under Debian's system python3 (python3-grpcio, python3-protobuf,
python3-pytest) with ONCEJOB_ADDR set; cmd/oncejob's e2e test does that.
"""
import os
import pathlib
import sys
import uuid

import grpc
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "gen" / "python"))

from oncejob.v1 import job_pb2, job_pb2_grpc  # noqa: E402


@pytest.fixture(scope="module")
def stub():
    addr = os.environ["ONCEJOB_ADDR"]
    with grpc.insecure_channel(addr) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        yield job_pb2_grpc.JobServiceStub(channel)


def submit(stub, key, text, **kw):
    req = job_pb2.SubmitJobRequest(
        pipeline="summarize",
        document=job_pb2.Document(text=text, media_type="text/plain"),
        **kw,
    )
    return stub.SubmitJob.with_call(req, metadata=[("idempotency-key", key)])


def test_submit_replay_returns_the_same_job(stub):
    key = "py-" + uuid.uuid4().hex
    first, call = submit(stub, key, "hello from python", labels={"client": "py"})
    assert first.outcome == job_pb2.SUBMIT_OUTCOME_CREATED
    assert first.job.status == job_pb2.JOB_STATUS_QUEUED
    assert first.job.dedup_key.startswith("dedup:v1:")
    assert dict(call.initial_metadata()).get("idempotent-replayed") is None

    again, call = submit(stub, key, "hello from python", labels={"client": "other"})
    assert again.outcome == job_pb2.SUBMIT_OUTCOME_EXISTING
    assert again.job.id == first.job.id
    assert dict(call.initial_metadata()).get("idempotent-replayed") == "true"

    got = stub.GetJob(job_pb2.GetJobRequest(job_id=first.job.id))
    assert got.job.id == first.job.id
    assert got.job.labels["client"] == "py"


def test_key_reused_with_another_request_is_invalid_argument(stub):
    key = "py-" + uuid.uuid4().hex
    submit(stub, key, "one")
    with pytest.raises(grpc.RpcError) as err:
        submit(stub, key, "two")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "already used with a different request" in err.value.details()


def test_missing_key_and_unknown_job(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.SubmitJob(job_pb2.SubmitJobRequest(pipeline="summarize", document=job_pb2.Document(text="x")))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    with pytest.raises(grpc.RpcError) as err:
        stub.GetJob(job_pb2.GetJobRequest(job_id=str(uuid.uuid4())))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_list_jobs_pages(stub):
    for i in range(3):
        submit(stub, "py-list-" + uuid.uuid4().hex, f"list doc {i} {uuid.uuid4().hex}")
    page = stub.ListJobs(job_pb2.ListJobsRequest(page_size=2))
    assert len(page.jobs) == 2
    assert page.next_page_token
    nxt = stub.ListJobs(job_pb2.ListJobsRequest(page_size=2, page_token=page.next_page_token))
    assert nxt.jobs
    assert not {j.id for j in page.jobs} & {j.id for j in nxt.jobs}
