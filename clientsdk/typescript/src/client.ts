// The client: a thin layer on Connect-ES over the generated service
// descriptors, with the Go SDK's guarantees (clientsdk/): one idempotency
// key per intent, fixed before the first attempt and sent on every retry;
// retries bounded by attempts and the call's deadline; watches that resume
// from the last seq or cursor after a broken stream, on any replica.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client as ServiceClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

import { BudgetError, decodeError, type OncejobError } from "./errors.js";
import {
  JobService,
  SubmitOutcome,
  type ApproveJobRequestSchema,
  type CancelJobRequestSchema,
  type Job,
  type JobEvent,
  type ListJobsRequestSchema,
  type ReplayJobRequestSchema,
  type ResolveJobRequestSchema,
  type SubmitJobRequestSchema,
  type WatchJobsRequestSchema,
  type WatchJobsResponse,
} from "./gen/oncejob/v1/job_pb.js";
import { RunService, type CreateRunRequestSchema, type Run } from "./gen/oncejob/v1/run_pb.js";
import { submitKey, workId } from "./keys.js";
import { deadline, resolvePolicy, retryable, sleep, waitMs, withRetries, type RetryPolicy } from "./retry.js";

export type SubmitRequest = MessageInitShape<typeof SubmitJobRequestSchema>;
export type CreateRunRequest = MessageInitShape<typeof CreateRunRequestSchema>;

/** ClientOptions configure a Client. */
export interface ClientOptions {
  /** The server's HTTP address (serve --http-addr), e.g. "https://oncejob.example.com". Required unless transport is given. */
  baseUrl?: string;
  /** "connect" (default) or "grpc-web": the protocol over fetch. */
  protocol?: "connect" | "grpc-web";
  /** A Connect transport of your own (e.g. from "@oncejob/client/node"); baseUrl and protocol are then unused. */
  transport?: Transport;
  /** The API key, sent as "Authorization: Bearer <key>". */
  apiKey?: string;
  /** The deadline of each logical call, retries included; default 30 000 ms. 0: none. */
  timeoutMs?: number;
  /** The retry policy of every call and of watch reconnects. */
  retry?: RetryPolicy;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof globalThis.fetch;
}

/** CallOptions configure one call. */
export interface CallOptions {
  /** The idempotency key of this intent; default: derived (submitKey, runKey) or made once for the call. */
  idempotencyKey?: string;
  /** Ends the call (and its retries). */
  signal?: AbortSignal;
  /** This call's deadline, retries included; default the client's. */
  timeoutMs?: number;
  /** This call's retry policy; default the client's. */
  retry?: RetryPolicy;
}

/** WatchOptions configure watchJob, watchJobs and watchRun. */
export interface WatchOptions {
  /** Ends the watch. */
  signal?: AbortSignal;
  /** Reconnects: maxAttempts counts consecutive failed connections with no item between. */
  retry?: RetryPolicy;
}

/** What submit did. */
export interface SubmitResult {
  job: Job;
  outcome: SubmitOutcome;
  /** The key the call used: the caller's, or submitKey(req). */
  key: string;
  /** The key had been seen before: the job is the one the first submission created. */
  replayed: boolean;
  /** The job took its result from an identical computation (job.deduplicatedFrom). */
  deduplicated: boolean;
}

/** An item of submitMany: its key (default submitKey(request)) and request. */
export interface SubmitItem {
  key?: string;
  request: SubmitRequest;
}

/** What submitMany did with one item: its job, or its own error. */
export interface ItemResult {
  key: string;
  job?: Job;
  outcome?: SubmitOutcome;
  alreadyInRun: boolean;
  error?: OncejobError;
}

/** The most items one SubmitJobs call takes. */
export const MAX_BATCH = 1000;

/** runKey derives the idempotency key of a run, as the Go SDK's RunKey. */
export function runKey(req: CreateRunRequest): string {
  const fields: Record<string, unknown> = {
    name: req.name ?? "",
    pipeline: req.pipeline ?? "",
    model_profile: req.modelProfile ?? "",
    params: req.params ?? {},
    labels: { ...(req.labels ?? {}) },
  };
  if (req.providerBatch) fields.provider_batch = true;
  return workId("oncejob.run", 1, fields);
}

// randomKey makes the key of an operator call, once per call (never per
// attempt). Browsers and Node 19+ have Web Crypto as globalThis.crypto;
// on Node 18, "@oncejob/client/node" installs it.
function randomKey(prefix: string): string {
  const c = globalThis.crypto;
  if (!c?.getRandomValues) {
    throw new TypeError("oncejob: no Web Crypto (globalThis.crypto) to make an idempotency key: pass CallOptions.idempotencyKey, or import \"@oncejob/client/node\" on Node 18");
  }
  const b = c.getRandomValues(new Uint8Array(16));
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Client calls the oncejob API over the Connect protocol or gRPC-web, from
 * a browser or Node 18+. Every error is an OncejobError (or a subclass)
 * with the server's google.rpc details.
 */
export class Client {
  readonly jobs: ServiceClient<typeof JobService>;
  readonly runs: ServiceClient<typeof RunService>;
  private readonly timeoutMs: number;
  private readonly policy: RetryPolicy;

  constructor(opts: ClientOptions) {
    let transport = opts.transport;
    const interceptors: Interceptor[] = [];
    if (opts.apiKey) {
      const auth = "Bearer " + opts.apiKey;
      interceptors.push((next) => (req) => {
        req.header.set("Authorization", auth);
        return next(req);
      });
    }
    if (!transport) {
      if (!opts.baseUrl) throw new TypeError("oncejob: ClientOptions.baseUrl or transport is required");
      const o = { baseUrl: opts.baseUrl, interceptors, fetch: opts.fetch };
      transport = opts.protocol === "grpc-web" ? createGrpcWebTransport(o) : createConnectTransport(o);
    } else if (opts.apiKey) {
      const inner = transport;
      const auth = (header: HeadersInit | undefined) => {
        const h = new Headers(header);
        h.set("Authorization", "Bearer " + opts.apiKey);
        return h;
      };
      transport = {
        unary: (method, signal, timeoutMs, header, input, ctx) => inner.unary(method, signal, timeoutMs, auth(header), input, ctx),
        stream: (method, signal, timeoutMs, header, input, ctx) => inner.stream(method, signal, timeoutMs, auth(header), input, ctx),
      };
    }
    this.jobs = createClient(JobService, transport);
    this.runs = createClient(RunService, transport);
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.policy = opts.retry ?? {};
  }

  /**
   * call makes one logical unary call: the key on every attempt, retries
   * per the policy within the deadline, the error decoded. onHeader sees
   * each attempt's response headers.
   */
  private async call<T>(key: string, o: CallOptions, attempt: (opts: { signal: AbortSignal; timeoutMs?: number; headers: Headers; onHeader: (h: Headers) => void }) => Promise<T>): Promise<{ res: T; header: Headers }> {
    const dl = deadline(o.timeoutMs ?? this.timeoutMs, o.signal);
    let header = new Headers();
    try {
      const res = await withRetries(resolvePolicy(o.retry ?? this.policy), dl, key, (signal, timeoutMs) => {
        const headers = new Headers();
        if (key) headers.set("Idempotency-Key", key);
        return attempt({ signal, timeoutMs, headers, onHeader: (h) => (header = h) });
      });
      return { res, header };
    } finally {
      dl.done();
    }
  }

  /**
   * submit submits a job once. Its idempotency key is the caller's or
   * submitKey(req), fixed before the first attempt and sent on every retry,
   * so however often the call is retried, or the program restarted and the
   * same request submitted again, there is one job; a replay answers the
   * first job with outcome EXISTING (replayed: true). Errors: KeyReusedError
   * (the key was used for another request), InvalidRequestError,
   * BudgetError, OncejobError.
   */
  async submit(req: SubmitRequest, o: CallOptions = {}): Promise<SubmitResult> {
    const key = o.idempotencyKey ?? submitKey(req as Parameters<typeof submitKey>[0]);
    const { res, header } = await this.call(key, o, (a) => this.jobs.submitJob(req, a));
    const job = res.job!;
    return {
      job,
      outcome: res.outcome,
      key,
      replayed: res.outcome === SubmitOutcome.EXISTING || header.get("Idempotent-Replayed") === "true",
      deduplicated: job.deduplicatedFrom !== "",
    };
  }

  /**
   * submitMany submits items in SubmitJobs calls of up to MAX_BATCH, each
   * item under its own key (default submitKey), answered on its own; with
   * runId the items join that run. A call that fails as a whole throws,
   * with the items answered so far lost to the caller but not to the
   * server: submitting again with the same keys answers them as they are.
   */
  async submitMany(items: SubmitItem[], o: CallOptions & { runId?: string; batchSize?: number } = {}): Promise<ItemResult[]> {
    const size = Math.min(Math.max(o.batchSize ?? MAX_BATCH, 1), MAX_BATCH);
    const results: ItemResult[] = items.map((it) => ({ key: it.key ?? submitKey(it.request as Parameters<typeof submitKey>[0]), alreadyInRun: false }));
    for (let start = 0; start < items.length; start += size) {
      const batch = items.slice(start, start + size).map((it, j) => ({ idempotencyKey: results[start + j].key, request: it.request }));
      const { res } = await this.call("", o, (a) => this.jobs.submitJobs({ runId: o.runId ?? "", items: batch }, a));
      res.results.forEach((r, j) => {
        const out = results[start + j];
        out.job = r.job;
        out.outcome = r.outcome;
        out.alreadyInRun = r.alreadyInRun;
        if (r.error) out.error = decodeStatus(r.error, out.key);
      });
    }
    return results;
  }

  /** get returns one job; one that does not exist for the caller is an OncejobError NOT_FOUND. */
  async get(jobId: string, o: CallOptions = {}): Promise<Job> {
    return (await this.call("", o, (a) => this.jobs.getJob({ jobId }, a))).res.job!;
  }

  /** list iterates over every job req selects, newest first, a page at a time. */
  async *list(req: MessageInitShape<typeof ListJobsRequestSchema> = {}, o: CallOptions = {}): AsyncGenerator<Job> {
    let pageToken = req.pageToken ?? "";
    for (;;) {
      const { res } = await this.call("", o, (a) => this.jobs.listJobs({ ...req, pageToken }, a));
      yield* res.jobs;
      if (!res.nextPageToken) return;
      pageToken = res.nextPageToken;
    }
  }

  /** cancel cancels a job: at once if no worker holds it, else at the worker's next heartbeat. */
  async cancel(req: MessageInitShape<typeof CancelJobRequestSchema>, o: CallOptions = {}): Promise<Job> {
    return (await this.call(o.idempotencyKey ?? randomKey("oncejob-op-"), o, (a) => this.jobs.cancelJob(req, a))).res.job!;
  }

  /** replay queues a FAILED or DEAD_LETTERED job again with a fresh budget (PreconditionError otherwise). */
  async replay(req: MessageInitShape<typeof ReplayJobRequestSchema>, o: CallOptions = {}): Promise<Job> {
    return (await this.call(o.idempotencyKey ?? randomKey("oncejob-op-"), o, (a) => this.jobs.replayJob(req, a))).res.job!;
  }

  /** resolve settles an OUTCOME_UNKNOWN job: retry it or fail it. */
  async resolve(req: MessageInitShape<typeof ResolveJobRequestSchema>, o: CallOptions = {}): Promise<Job> {
    return (await this.call(o.idempotencyKey ?? randomKey("oncejob-op-"), o, (a) => this.jobs.resolveJob(req, a))).res.job!;
  }

  /** approve approves (publishes) or rejects (cancels) a job AWAITING_APPROVAL. */
  async approve(req: MessageInitShape<typeof ApproveJobRequestSchema>, o: CallOptions = {}): Promise<Job> {
    return (await this.call(o.idempotencyKey ?? randomKey("oncejob-op-"), o, (a) => this.jobs.approveJob(req, a))).res.job!;
  }

  /** createRun creates a run once: its key is the caller's or runKey(req). */
  async createRun(req: CreateRunRequest, o: CallOptions = {}): Promise<Run> {
    return (await this.call(o.idempotencyKey ?? runKey(req), o, (a) => this.runs.createRun(req, a))).res.run!;
  }

  /** getRun returns a run with its progress. */
  async getRun(runId: string, o: CallOptions = {}): Promise<Run> {
    return (await this.call("", o, (a) => this.runs.getRun({ runId }, a))).res.run!;
  }

  /**
   * watchJob yields a job's events in seq order, each once, and ends after
   * the terminal one. A broken stream — a lost connection, a server that
   * shuts down (UNAVAILABLE, SERVER_SHUTTING_DOWN) — is resumed after the
   * last event yielded, on whatever server baseUrl reaches, waiting per the
   * retry policy; maxAttempts failed reconnects in a row end it with a
   * BudgetError. Any other error (NOT_FOUND...) is thrown.
   */
  async *watchJob(jobId: string, o: WatchOptions & { afterSeq?: number } = {}): AsyncGenerator<JobEvent> {
    let last = o.afterSeq ?? 0;
    yield* this.reconnecting(o, (signal) => this.jobs.watchJob({ jobId, afterSeq: last }, { signal }), (res) => {
      const e = res.event;
      if (!e || e.seq <= last) return undefined; // never sent by the server; cheap insurance
      last = e.seq;
      return e;
    });
  }

  /**
   * watchJobs yields the changes of the caller's jobs that req selects,
   * each once, in the server's order, from req.afterCursor on; it never
   * ends on its own (break, or abort the signal). It resumes from the last
   * cursor yielded after a broken stream, like watchJob.
   */
  async *watchJobs(req: MessageInitShape<typeof WatchJobsRequestSchema> = {}, o: WatchOptions = {}): AsyncGenerator<WatchJobsResponse> {
    let cursor = req.afterCursor ?? "";
    yield* this.reconnecting(o, (signal) => this.jobs.watchJobs({ ...req, afterCursor: cursor }, { signal }), (ch) => {
      cursor = ch.cursor;
      return ch;
    });
  }

  /** watchRun yields a run's progress snapshots, each with a larger seq, until every item is terminal; it resumes like watchJob. */
  async *watchRun(runId: string, o: WatchOptions & { afterSeq?: bigint } = {}): AsyncGenerator<Run> {
    let last = o.afterSeq ?? 0n;
    yield* this.reconnecting(o, (signal) => this.runs.watchRun({ runId, afterSeq: last }, { signal }), (res) => {
      const seq = res.run?.progress?.seq ?? 0n;
      if (!res.run || seq <= last) return undefined;
      last = seq;
      return res.run;
    });
  }

  /** wait returns the job once it is terminal (SUCCEEDED, FAILED, CANCELLED, DEAD_LETTERED). */
  async wait(jobId: string, o: WatchOptions = {}): Promise<Job> {
    for await (const _ of this.watchJob(jobId, o)) {
      // each event once; the last is terminal
    }
    return this.get(jobId, { signal: o.signal });
  }

  // reconnecting runs stream attempts until one ends, the consumer stops,
  // or an error is final: not retryable, the caller's abort, or the
  // maxAttempts-th failure in a row with no item between. Each attempt has
  // a signal of its own, aborted when it ends, so an abandoned stream is
  // released at once.
  private async *reconnecting<R, T>(o: WatchOptions, open: (signal: AbortSignal) => AsyncIterable<R>, take: (r: R) => T | undefined): AsyncGenerator<T> {
    const p = resolvePolicy(o.retry ?? this.policy);
    let failures = 0;
    for (;;) {
      const ac = new AbortController();
      const onAbort = () => ac.abort(o.signal?.reason);
      o.signal?.addEventListener("abort", onAbort);
      let progress = false;
      try {
        if (o.signal?.aborted) throw o.signal.reason;
        for await (const r of open(ac.signal)) {
          const item = take(r);
          if (item === undefined) continue;
          progress = true;
          yield item;
        }
        return;
      } catch (err) {
        const e = decodeError(err);
        if (o.signal?.aborted || !retryable(err)) throw e;
        if (progress) failures = 0;
        failures++;
        if (failures >= p.maxAttempts) throw new BudgetError(failures, e, false);
        const never = new AbortController();
        await sleep(waitMs(p, failures, e), o.signal ?? never.signal).catch(() => {
          throw e;
        });
      } finally {
        ac.abort();
        o.signal?.removeEventListener("abort", onAbort);
      }
    }
  }
}

// decodeStatus is the error of one SubmitJobs item, a google.rpc.Status.
function decodeStatus(st: { code: number; message: string; details: Array<{ typeUrl: string; value: Uint8Array }> }, key: string): OncejobError {
  const err = new ConnectError(st.message, st.code as Code);
  err.details = st.details.map((d) => ({ type: d.typeUrl.slice(d.typeUrl.lastIndexOf("/") + 1), value: d.value }));
  return decodeError(err, key);
}
