"""The Python SDK against the real binary.

cmd/oncejob's TestPythonSDK runs these with a slow embedded server
(ONCEJOB_ADDR), the fault proxy in front of it (ONCEJOB_PROXY_ADDR), two
replicas on one Postgres schema (ONCEJOB_REPLICAS) with a claimed job on
them (ONCEJOB_CLUSTER_JOB), and an HTTP control API (ONCEJOB_CONTROL).
"""
import asyncio
import json
import os
import threading
import urllib.request
import uuid

import pytest

from oncejob import (AsyncClient, Client, InvalidRequestError, KeyReusedError, NotFoundError, PreconditionError,
                     RetryPolicy, job_pb2, work_id)

ENV = ("ONCEJOB_ADDR", "ONCEJOB_PROXY_ADDR", "ONCEJOB_CONTROL", "ONCEJOB_REPLICAS", "ONCEJOB_CLUSTER_JOB")
pytestmark = pytest.mark.skipif(not all(os.environ.get(k) for k in ENV),
                                reason="run by cmd/oncejob's TestPythonSDK, which starts the servers")

SUBMIT = "/oncejob.v1.JobService/SubmitJob"
WATCH = "/oncejob.v1.JobService/WatchJob"


def control(path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    method = "GET" if body is None and path.endswith("/calls") else "POST"
    req = urllib.request.Request(os.environ["ONCEJOB_CONTROL"] + path, data=data if method == "POST" else None, method=method)
    with urllib.request.urlopen(req, timeout=60) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@pytest.fixture
def proxy():
    control("/proxy/reset", {})
    yield os.environ["ONCEJOB_PROXY_ADDR"]
    control("/proxy/reset", {})


def unique(text):
    return f"{text} ({uuid.uuid4().hex})"


def test_submit_retries_lost_response_with_same_key(proxy):
    control("/proxy/faults", {"drop_method": SUBMIT, "drop_responses": 2})
    waits = []
    with Client(proxy, retry=RetryPolicy(initial_backoff=0.1, on_retry=lambda e: waits.append(e.wait))) as c:
        res = c.submit("summarize", unique("Invoice 77: lost twice on the way back."))
    assert res.replayed, "the retry must be a replay"
    assert res.outcome == job_pb2.SUBMIT_OUTCOME_EXISTING

    calls = control("/proxy/calls")
    assert [c["fault"] for c in calls] == ["dropped", "dropped", ""]
    assert {c["key"] for c in calls} == {res.key}, "every attempt carried the one key"
    assert len(waits) == 2
    for i in (1, 2):
        assert 0 <= waits[i - 1] < 0.1 * 2 ** (i - 1), "full jitter below the cap"
        gap = (calls[i]["unix_nano"] - calls[i - 1]["unix_nano"]) / 1e9
        assert gap >= waits[i - 1], "the attempt came no sooner than the backoff"

    with Client(os.environ["ONCEJOB_ADDR"]) as direct:
        mine = [j for j in direct.list() if j.idempotency_key == res.key]
    assert [j.id for j in mine] == [res.job.id], "one intent, one job"


def watched_log(job_id, addr):
    with Client(addr) as c:
        return list(c.watch(job_id))


def assert_complete(seen, full):
    assert [e.seq for e in seen] == list(range(1, len(full) + 1))
    assert [e.SerializeToString() for e in seen] == [e.SerializeToString() for e in full]
    assert full[-1].status == job_pb2.JOB_STATUS_SUCCEEDED


def test_watch_survives_three_cuts(proxy):
    control("/proxy/faults", {"cut_method": WATCH, "cut_streams": 3, "cut_after": 1})
    with Client(proxy, retry=RetryPolicy(initial_backoff=0.02)) as c:
        res = c.submit("summarize", unique("A document watched through a bad network."))
        seen = list(c.watch(res.job.id, timeout=60))
    watches = [x for x in control("/proxy/calls") if x["method"] == WATCH]
    assert [x["fault"] for x in watches] == ["cut", "cut", "cut", ""]
    end_ns = seen[-1].time.ToNanoseconds()
    assert watches[2]["unix_nano"] < end_ns, "the cuts came while the job ran"
    assert_complete(seen, watched_log(res.job.id, os.environ["ONCEJOB_ADDR"]))


def test_watch_resumes_on_another_replica():
    job_id = os.environ["ONCEJOB_CLUSTER_JOB"]
    replicas = os.environ["ONCEJOB_REPLICAS"]
    seen, reconnects = [], []
    with Client(replicas, retry=RetryPolicy(initial_backoff=0.02, on_retry=lambda e: reconnects.append(e.error))) as c:
        events = c.watch(job_id, timeout=60)
        seen.append(next(events))  # submitted
        seen.append(next(events))  # claimed
        control("/cluster/step", {})
        seen.append(next(events))
        control("/cluster/stop", {})  # the first address: the replica this watch is on
        for _ in range(4):
            control("/cluster/step", {})
            seen.append(next(events))
        seen.extend(events)
    assert reconnects and "resume with after_seq=3" in reconnects[0].details()
    assert_complete(seen, watched_log(job_id, replicas.split(",")[1]))


def test_submit_wait_replay_get_list():
    addr = os.environ["ONCEJOB_ADDR"]
    text = unique("Invoice 42: 3 licences, EUR 1,200, due 2026-12-31.")
    with Client(addr) as c:
        res = c.submit("summarize", text, name="invoice-42.txt", params={"language": "en"}, labels={"team": "billing"})
        assert res.outcome == job_pb2.SUBMIT_OUTCOME_CREATED and not res.replayed
        job = c.wait(res.job.id, timeout=60)
        assert job.status == job_pb2.JOB_STATUS_SUCCEEDED
        assert job.output["summary"]
        again = c.submit("summarize", text, name="invoice-42.txt", params={"language": "en"}, labels={"team": "other"})
        assert again.replayed and again.job.id == res.job.id and again.key == res.key
        assert not res.deduplicated and not again.deduplicated, "a computation of its own"
        # Another key, the same computation: a job of its own with the
        # first's result, and its replay says so too.
        other = c.submit("summarize", text, name="invoice-42.txt", params={"language": "en"}, key="py-dedup-" + uuid.uuid4().hex)
        assert other.outcome == job_pb2.SUBMIT_OUTCOME_DEDUPLICATED and other.deduplicated and not other.replayed
        assert other.job.id != res.job.id and other.job.deduplicated_from == res.job.id
        assert c.submit("summarize", text, name="invoice-42.txt", params={"language": "en"}, key=other.key).deduplicated
        assert c.get(res.job.id).labels["team"] == "billing"
        assert res.job.id in {j.id for j in c.list(page_size=2)}


def test_server_errors_are_typed():
    with Client(os.environ["ONCEJOB_ADDR"]) as c:
        key = "py-reused-" + uuid.uuid4().hex
        c.submit("summarize", "one", key=key)
        with pytest.raises(KeyReusedError) as err:
            c.submit("summarize", "two", key=key)
        assert err.value.key == key
        with pytest.raises(NotFoundError):
            c.get(str(uuid.uuid4()))
        with pytest.raises(InvalidRequestError) as err:
            c.submit("no-such-pipeline", "x")
        assert "pipeline" in [v.field for v in err.value.violations]
        done = c.submit("summarize", unique("to be replayed"))
        c.wait(done.job.id, timeout=60)
        with pytest.raises(PreconditionError) as err:
            c.replay(done.job.id, reason="it succeeded")
        assert err.value.job_status == "JOB_STATUS_SUCCEEDED" and err.value.job_id == done.job.id


def test_async_client_end_to_end(proxy):
    control("/proxy/faults", {"drop_method": SUBMIT, "drop_responses": 1, "cut_method": WATCH, "cut_streams": 1, "cut_after": 2})

    async def run():
        async with AsyncClient(proxy, retry=RetryPolicy(initial_backoff=0.02)) as c:
            res = await c.submit("summarize", unique("async"))
            seen = [e async for e in c.watch(res.job.id, timeout=60)]
            job = await c.wait(res.job.id, timeout=60)
            return res, seen, job

    res, seen, job = asyncio.run(run())
    assert res.replayed
    assert job.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert_complete(seen, watched_log(res.job.id, os.environ["ONCEJOB_ADDR"]))


def test_random_work_ids_match_go():
    with open(os.environ["ONCEJOB_WORKID_RANDOM"], encoding="utf-8") as f:
        items = json.load(f)
    assert len(items) >= 1000
    for item in items:
        assert work_id("random.case", 1, json.loads(item["payload"])) == item["work_id"], item["payload"]


def test_submit_many_into_a_run():
    from oncejob import InvalidRequestError, run_key
    with Client(os.environ["ONCEJOB_ADDR"]) as c:
        name = unique("py-run")
        run = c.create_run(name, pipeline="summarize", labels={"sdk": "python"})
        assert c.create_run(name, pipeline="summarize", labels={"sdk": "python"}).id == run.id
        items = [{"document": unique(f"page {i}"), "pipeline": "summarize"} for i in range(5)]
        items.append({"document": "", "pipeline": "summarize"})  # empty: refused alone
        first = c.submit_many(items, run_id=run.id, batch_size=2)
        assert [r.outcome for r in first[:5]] == [job_pb2.SUBMIT_OUTCOME_CREATED] * 5
        assert isinstance(first[5].error, InvalidRequestError) and first[5].job is None
        again = c.submit_many(items[:5], run_id=run.id)
        assert all(r.already_in_run and r.job.id == f.job.id for r, f in zip(again, first))
        last = None
        for snapshot in c.watch_run(run.id, timeout=60):
            assert last is None or snapshot.progress.seq > last.progress.seq
            last = snapshot
        assert last.progress.complete and last.progress.succeeded == 5 and last.progress.items == 5
        got = c.get_run(run.id)
        assert got.progress.computed == 5 and got.labels["sdk"] == "python"
        assert c.retry_run_failures(run.id, key="py-retry-" + run.id).replayed == 0
        assert run.id in {r.id for r in c.list_runs()}
        assert c.cancel_run(run.id).run.state == 2  # RUN_STATE_CANCELLED
        assert run_key("nightly", "summarize") == "4a0fb4ae1b214ea8fc5e9eb0a1784ec727fc18d9eef3e4f0ebaadcd8680b040e"


def test_provider_batch_run():
    # The server's simulator has a batch API (--llm-batch-api): the run's items take
    # the batch twin of the pipeline's profile and all succeed through it.
    from oncejob import run_key
    with Client(os.environ["ONCEJOB_ADDR"]) as c:
        name = unique("py-batch-run")
        run = c.create_run(name, pipeline="summarize", provider_batch=True)
        assert run.provider_batch
        assert c.create_run(name, pipeline="summarize", provider_batch=True).id == run.id
        assert c.create_run(name, pipeline="summarize").id != run.id, "without the option: another run"
        results = c.submit_many([{"document": unique(f"batch page {i}")} for i in range(3)], run_id=run.id)
        assert [r.job.model_profile for r in results] == ["default@batch"] * 3
        last = None
        for snapshot in c.watch_run(run.id, timeout=60):
            if not snapshot.progress.complete:
                assert snapshot.progress.provider_batch_window.seconds == 24 * 3600
            last = snapshot
        assert last.progress.complete and last.progress.succeeded == 3
        assert not last.progress.HasField("provider_batch_window"), "nothing left to wait for"
        batches = c.list_run_batches(run.id)
        assert sum(b.lines for b in batches) == 3 and sum(b.answered_lines for b in batches) == 3
        assert all(b.status == "completed" and b.price_class == "batch" for b in batches)
        assert sum(b.cost_micros for b in batches) == last.progress.usage.cost_micros
        assert run_key(name, "summarize", provider_batch=True) != run_key(name, "summarize")


def test_async_submit_many_into_a_run():
    async def run():
        async with AsyncClient(os.environ["ONCEJOB_ADDR"]) as c:
            r = await c.create_run(unique("py-async-run"), pipeline="summarize")
            results = await c.submit_many([{"document": unique(f"async page {i}")} for i in range(3)], run_id=r.id)
            snapshots = [s async for s in c.watch_run(r.id, timeout=60)]
            return r, results, snapshots, await c.get_run(r.id)

    r, results, snapshots, got = asyncio.run(run())
    assert all(x.outcome == job_pb2.SUBMIT_OUTCOME_CREATED and x.job.pipeline == "summarize" for x in results)
    assert snapshots[-1].progress.complete and got.progress.succeeded == 3
