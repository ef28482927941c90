// The client against the real server (test/harness.mjs), on the embedded
// store and on Postgres, over the Connect protocol and gRPC-web (and gRPC
// from Node): keys and replays, the refusal of a reused key, watches to
// SUCCEEDED and across a restart, roles and tenants, runs, cancel and
// replay, typed errors.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import {
  BudgetError,
  Client,
  InvalidRequestError,
  JobStatus,
  KeyReusedError,
  OncejobError,
  PreconditionError,
  SubmitOutcome,
  submitKey,
} from "../dist/index.js";
import { grpcTransport } from "../dist/node.js";
import { KEYS, Server, skipOrFail } from "./harness.mjs";

const TERMINAL = new Set([JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.DEAD_LETTERED]);

const doc = (text, pipeline = "quick") => ({ pipeline, document: { name: "doc.txt", content: { case: "text", value: text } } });

/** collect runs a watch to its end and checks its seqs: 1, 2, 3... with no gap and no duplicate. */
async function collect(events) {
  const seen = [];
  for await (const e of events) seen.push(e);
  assert.deepEqual(seen.map((e) => e.seq), seen.map((_, i) => i + 1), "seqs from 1, no gap, no duplicate");
  return seen;
}

for (const store of ["embedded", "postgres"]) {
  describe(`against oncejob serve (${store})`, { skip: skipOrFail(store) }, () => {
    let server;
    before(async () => {
      server = await Server.start(store);
    });
    after(async () => {
      await server?.close();
    });
    const client = (key = KEYS.acme, protocol = "connect", extra = {}) => new Client({ baseUrl: server.baseUrl, apiKey: key, protocol, ...extra });

    for (const protocol of ["connect", "grpc-web"]) {
      test(`${protocol}: the same submit twice is one job, the second replayed`, async () => {
        const c = client(KEYS.acme, protocol);
        const req = doc(`Invoice ${randomUUID()}: 3 licences, EUR 1,200.`);
        const first = await c.submit(req);
        assert.equal(first.key, submitKey(req), "the derived key, the same as Go's and Python's");
        assert.equal(first.outcome, SubmitOutcome.CREATED);
        assert.equal(first.replayed, false);
        const again = await c.submit(req);
        assert.equal(again.job.id, first.job.id);
        assert.equal(again.outcome, SubmitOutcome.EXISTING);
        assert.equal(again.replayed, true);
      });

      test(`${protocol}: another request under the same key is refused with IDEMPOTENCY_KEY_REUSED`, async () => {
        const c = client(KEYS.acme, protocol);
        const idempotencyKey = "ts-" + randomUUID();
        await c.submit(doc("first"), { idempotencyKey });
        await assert.rejects(c.submit(doc("second"), { idempotencyKey }), (e) => {
          assert.ok(e instanceof KeyReusedError, e);
          assert.equal(e.codeName, "INVALID_ARGUMENT");
          assert.equal(e.reason, "IDEMPOTENCY_KEY_REUSED");
          assert.equal(e.key, idempotencyKey);
          return true;
        });
      });

      test(`${protocol}: a watch follows a job to SUCCEEDED`, async () => {
        const c = client(KEYS.acme, protocol);
        const { job } = await c.submit(doc(`watch ${randomUUID()}`));
        const events = await collect(c.watchJob(job.id));
        assert.equal(events.at(-1).status, JobStatus.SUCCEEDED);
        assert.ok(events.length >= 3, `queued, running..., succeeded: ${events.length}`);
        assert.equal((await c.get(job.id)).status, JobStatus.SUCCEEDED);
      });

      test(`${protocol}: API keys and roles hold`, async () => {
        const { job } = await client(KEYS.acme, protocol).submit(doc(`roles ${randomUUID()}`, "reviewed"));
        await assert.rejects(client(KEYS.acmeSubmitter, protocol).cancel({ jobId: job.id }), (e) => e instanceof OncejobError && e.codeName === "PERMISSION_DENIED");
        await assert.rejects(client(KEYS.globex, protocol).get(job.id), (e) => e instanceof OncejobError && e.codeName === "NOT_FOUND");
        await assert.rejects(client(KEYS.globex, protocol).watchJob(job.id).next(), (e) => e instanceof OncejobError && e.codeName === "NOT_FOUND");
        await assert.rejects(client("not-a-key", protocol).get(job.id), (e) => e instanceof OncejobError && e.codeName === "UNAUTHENTICATED");
        const submitter = await client(KEYS.acmeSubmitter, protocol).get(job.id);
        assert.equal(submitter.id, job.id, "a submitter reads its tenant's jobs");
      });
    }

    test("a watch across a server restart resumes with no gap and no duplicate", async () => {
      const retries = [];
      const c = client(KEYS.acme, "connect", { retry: { maxAttempts: 100, maxBackoffMs: 300, onRetry: (r) => retries.push(r.error.codeName) } });
      const { job } = await c.submit(doc(`restart ${randomUUID()}`, "reviewed"));
      const seen = [];
      const watch = c.watchJob(job.id);
      for (;;) {
        const { value } = await watch.next();
        seen.push(value);
        if (value.status === JobStatus.AWAITING_APPROVAL) break;
      }
      const next = watch.next(); // pending while the server goes down and comes back
      await server.restart();
      await c.approve({ jobId: job.id, approve: true });
      for (let r = await next; !r.done; r = await watch.next()) seen.push(r.value);
      assert.deepEqual(seen.map((e) => e.seq), seen.map((_, i) => i + 1), "seqs from 1, no gap, no duplicate");
      assert.equal(seen.at(-1).status, JobStatus.SUCCEEDED);
      assert.ok(retries.length > 0, "the stream broke and was resumed");
      assert.ok(retries.includes("UNAVAILABLE"), `the server said it was shutting down: ${retries}`);
    });

    test("watchJobs resumes from its cursor: each change once", async () => {
      const c = client();
      const first = await c.submit(doc(`changes ${randomUUID()}`, "reviewed"));
      const ac = new AbortController();
      let cursor;
      for await (const ch of c.watchJobs({}, { signal: ac.signal })) {
        if (ch.job?.id === first.job.id && ch.event?.status === JobStatus.AWAITING_APPROVAL) {
          cursor = ch.cursor;
          break;
        }
      }
      assert.ok(cursor);
      await c.cancel({ jobId: first.job.id, reason: "test" });
      for await (const ch of c.watchJobs({ afterCursor: cursor })) {
        if (ch.job?.id !== first.job.id) continue;
        assert.equal(ch.event.status, JobStatus.CANCELLED, "the next change of the job, none before it again");
        break;
      }
    });

    test("cancel and replay, typed errors with google.rpc details", async () => {
      const c = client();
      const { job } = await c.submit(doc(`cancel ${randomUUID()}`, "reviewed"));
      for await (const e of c.watchJob(job.id)) if (e.status === JobStatus.AWAITING_APPROVAL) break;
      const cancelled = await c.cancel({ jobId: job.id, reason: "not needed" });
      assert.equal(cancelled.status, JobStatus.CANCELLED);
      assert.equal((await c.cancel({ jobId: job.id })).status, JobStatus.CANCELLED, "cancelling a cancelled job returns it");
      await assert.rejects(c.replay({ jobId: job.id }), (e) => e instanceof PreconditionError && e.codeName === "FAILED_PRECONDITION");
      await assert.rejects(c.submit({ pipeline: "quick" }), (e) => {
        assert.ok(e instanceof InvalidRequestError, e);
        assert.ok(e.fieldViolations.some((f) => f.field === "document"), JSON.stringify(e.fieldViolations));
        return true;
      });
      await assert.rejects(c.get("not-a-uuid"), (e) => e instanceof InvalidRequestError && e.fieldViolations[0]?.field === "job_id");
    });

    test("runs: create once, submit items into it, follow its progress", async () => {
      const c = client();
      const req = { name: `run ${randomUUID()}`, pipeline: "quick" };
      const run = await c.createRun(req);
      assert.equal((await c.createRun(req)).id, run.id, "the run's key makes a second create the same run");
      const items = [0, 1, 2].map((i) => ({ request: doc(`item ${i} of ${run.id}`) }));
      const results = await c.submitMany(items, { runId: run.id });
      assert.equal(results.length, 3);
      for (const r of results) assert.ok(r.job && !r.error, r.error?.message);
      let last;
      for await (const snapshot of c.watchRun(run.id)) last = snapshot;
      assert.equal(last.progress.items, 3n);
      assert.equal(last.progress.succeeded, 3n);
      const again = await c.submitMany(items, { runId: run.id });
      assert.deepEqual(again.map((r) => r.job.id), results.map((r) => r.job.id), "the same keys are the same jobs");
      assert.ok(again.every((r) => r.outcome === SubmitOutcome.EXISTING && r.alreadyInRun));
    });

    test("gRPC from Node (connect-node) to the gRPC address: the same contract", async () => {
      const c = new Client({ transport: grpcTransport(`http://${server.grpcAddr}`), apiKey: KEYS.acme });
      const req = doc(`grpc ${randomUUID()}`);
      const first = await c.submit(req);
      const again = await c.submit(req);
      assert.equal(again.job.id, first.job.id);
      assert.equal(again.replayed, true);
      const events = await collect(c.watchJob(first.job.id));
      assert.ok(TERMINAL.has(events.at(-1).status));
    });

    test("a server that is not there: retries, then a BudgetError", async () => {
      const c = new Client({ baseUrl: "http://127.0.0.1:9", apiKey: KEYS.acme, retry: { maxAttempts: 3, initialBackoffMs: 1 } });
      await assert.rejects(c.get(randomUUID()), (e) => e instanceof BudgetError && e.attempts === 3);
    });
  });
}
