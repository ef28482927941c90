// The client's retries and watches against a scripted server (Connect's
// in-memory router transport, and a fetch that fails): one key on every
// attempt, RetryInfo's delay waited exactly, full jitter's caps, what is
// not retried, the deadline and the attempts as bounds, a broken
// connection retried, a watch resumed after its last seq. The Go SDK's
// clientsdk/retry_ext_test.go, in TypeScript.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";

import { BudgetError, Client, InvalidRequestError, JobService, JobStatus, SubmitOutcome, submitKey } from "../dist/index.js";
import { RetryInfoSchema } from "../dist/gen/google/rpc/error_details_pb.js";

const req = { pipeline: "summarize", document: { content: { case: "text", value: "Invoice 42" } } };

function scripted(failures, impl = {}) {
  const keys = [];
  const transport = createRouterTransport(({ service }) => {
    service(JobService, {
      submitJob(_req, ctx) {
        keys.push(ctx.requestHeader.get("idempotency-key"));
        const f = failures.shift();
        if (f) throw f;
        return { job: { id: "job-1" }, outcome: SubmitOutcome.CREATED };
      },
      ...impl,
    });
  });
  return { transport, keys };
}

const retryInfo = (ms) => [{ desc: RetryInfoSchema, value: { retryDelay: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 } } }];

test("RESOURCE_EXHAUSTED with RetryInfo: the server's delay, the same key on every attempt", async () => {
  const { transport, keys } = scripted([
    new ConnectError("slow down", Code.ResourceExhausted, undefined, retryInfo(30)),
    new ConnectError("slow down", Code.ResourceExhausted, undefined, retryInfo(20)),
  ]);
  const waits = [];
  const c = new Client({ transport, retry: { jitter: () => 0.999, onRetry: (r) => waits.push(r.waitMs) } });
  const res = await c.submit(req);
  assert.equal(res.job.id, "job-1");
  assert.deepEqual(waits, [30, 20], "exactly the RetryInfo delays");
  assert.deepEqual(keys, [submitKey(req), submitKey(req), submitKey(req)]);
});

test("full jitter: the wait is the jitter's fraction of a cap that doubles up to maxBackoffMs", async () => {
  const unavailable = () => new ConnectError("down", Code.Unavailable);
  const { transport, keys } = scripted([unavailable(), unavailable(), unavailable(), unavailable()]);
  const waits = [];
  const c = new Client({ transport, retry: { jitter: () => 0.5, initialBackoffMs: 10, maxBackoffMs: 30, onRetry: (r) => waits.push(r.waitMs) } });
  await c.submit(req, { idempotencyKey: "mine" });
  assert.deepEqual(waits, [5, 10, 15, 15]);
  assert.deepEqual(new Set(keys), new Set(["mine"]));
});

test("a keyed call's DEADLINE_EXCEEDED and a broken stream are retried; INVALID_ARGUMENT is not", async () => {
  const { transport, keys } = scripted([new ConnectError("took too long", Code.DeadlineExceeded), new ConnectError("missing EndStreamResponse", Code.Unknown)]);
  const c = new Client({ transport, retry: { initialBackoffMs: 1 } });
  await c.submit(req);
  assert.equal(keys.length, 3);

  const bad = scripted([new ConnectError("no document", Code.InvalidArgument)]);
  await assert.rejects(new Client({ transport: bad.transport }).submit(req), InvalidRequestError);
  assert.equal(bad.keys.length, 1);
});

test("the attempts and the deadline bound the retries", async () => {
  const always = () => scripted(Array.from({ length: 100 }, () => new ConnectError("down", Code.Unavailable, undefined, retryInfo(60_000))));
  const { transport } = always();
  await assert.rejects(new Client({ transport, timeoutMs: 100 }).submit(req), (e) => e instanceof BudgetError && e.deadline && e.attempts === 1);

  const s = scripted(Array.from({ length: 100 }, () => new ConnectError("down", Code.Unavailable)));
  await assert.rejects(new Client({ transport: s.transport, retry: { maxAttempts: 3, initialBackoffMs: 1 } }).submit(req), (e) => {
    assert.ok(e instanceof BudgetError);
    assert.equal(e.attempts, 3);
    assert.equal(e.deadline, false);
    assert.equal(e.last.codeName, "UNAVAILABLE");
    return true;
  });
  assert.equal(s.keys.length, 3);
});

test("a connection that breaks (fetch rejects) is retried with the same key", async () => {
  const seen = [];
  let calls = 0;
  const fetch = async (url, init) => {
    seen.push(new Headers(init.headers).get("idempotency-key"));
    if (++calls < 3) throw new TypeError("fetch failed");
    return new Response(JSON.stringify({ job: { id: "job-2" }, outcome: "SUBMIT_OUTCOME_EXISTING" }), { headers: { "content-type": "application/json" } });
  };
  const c = new Client({ baseUrl: "http://oncejob.invalid", fetch, retry: { initialBackoffMs: 1 } });
  const res = await c.submit(req);
  assert.equal(res.job.id, "job-2");
  assert.equal(res.replayed, true);
  assert.deepEqual(seen, [submitKey(req), submitKey(req), submitKey(req)]);
});

test("watchJob resumes after its last seq: each event once, in order", async () => {
  const asked = [];
  let streams = 0;
  const events = [1, 2, 3, 4, 5].map((seq) => ({ seq, status: seq === 5 ? JobStatus.SUCCEEDED : JobStatus.RUNNING }));
  const { transport } = scripted([], {
    async *watchJob(r) {
      asked.push(r.afterSeq);
      streams++;
      for (const e of events.filter((e) => e.seq > r.afterSeq)) {
        if (streams === 1 && e.seq === 3) throw new ConnectError("server shutting down", Code.Unavailable);
        if (streams === 2 && e.seq === 4) throw new ConnectError("terminated", Code.Unknown, undefined, undefined, new TypeError("terminated"));
        yield { event: e };
      }
    },
  });
  const c = new Client({ transport, retry: { initialBackoffMs: 1 } });
  const got = [];
  for await (const e of c.watchJob("job-1")) got.push(e.seq);
  assert.deepEqual(got, [1, 2, 3, 4, 5]);
  assert.deepEqual(asked, [0, 2, 3]);
});

test("a watch that keeps failing without progress ends with a BudgetError; NOT_FOUND ends it at once", async () => {
  const { transport } = scripted([], {
    // eslint-disable-next-line require-yield
    async *watchJob(r) {
      if (r.jobId === "gone") throw new ConnectError("no such job", Code.NotFound);
      throw new ConnectError("down", Code.Unavailable);
    },
  });
  const c = new Client({ transport, retry: { maxAttempts: 4, initialBackoffMs: 1 } });
  await assert.rejects(c.watchJob("job-1").next(), (e) => e instanceof BudgetError && e.attempts === 4);
  await assert.rejects(c.watchJob("gone").next(), (e) => e.codeName === "NOT_FOUND" && !(e instanceof BudgetError));
});
