"""Watches every job of the tenant with the asyncio client and stops after
N jobs succeeded (default 1), printing each change once. A broken stream is
resumed from the last cursor, on any replica.

    PYTHONPATH=clientsdk/python python3 examples/python/resilient_watch.py 1
"""
import asyncio
import os
import sys

from oncejob import AsyncClient, job_pb2


async def main(want: int) -> None:
    async with AsyncClient(os.environ.get("ONCEJOB_ADDR", "127.0.0.1:7070")) as c:
        succeeded = 0
        async for change in c.watch_jobs(timeout=120):
            e = change.event
            print(change.job.id, job_pb2.JobStatus.Name(e.status), job_pb2.JobStage.Name(e.stage), e.message)
            if e.status == job_pb2.JOB_STATUS_SUCCEEDED:
                succeeded += 1
                if succeeded == want:
                    return


asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
