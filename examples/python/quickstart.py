"""Submits a document to oncejob once, follows it through its stages and
prints the summary. Against `oncejob serve`:

    PYTHONPATH=clientsdk/python python3 examples/python/quickstart.py
"""
import os

from oncejob import Client, job_pb2

with Client(os.environ.get("ONCEJOB_ADDR", "127.0.0.1:7070")) as c:
    # No key given: submit derives the same key as the Go SDK would, so
    # running this twice (or after the Go quick start) is one job.
    res = c.submit("summarize", "Invoice 42: 3 licences, EUR 1,200, due 2026-12-31.")
    print(f"job {res.job.id} (replayed: {res.replayed})")
    # Deduplicated: the same computation (document, pipeline, prompt,
    # model) had already run under another key; its result is reused.
    if res.deduplicated:
        print(f"deduplicated: true (job {res.job.deduplicated_from} already computed it; no new generation)")
    else:
        print("deduplicated: false (a new computation)")

    # Every event once, in order, even if the stream breaks on the way.
    for e in c.watch(res.job.id):
        print(" ", job_pb2.JobStatus.Name(e.status), job_pb2.JobStage.Name(e.stage))
    print("summary:", c.get(res.job.id).output["summary"])
