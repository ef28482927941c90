// Retries, as the Go SDK's (clientsdk/retry.go): every call the SDK makes is
// read-only or carries one idempotency key fixed for the whole call, so an
// attempt whose outcome is unknown — a deadline, a broken connection — is
// retried as a replay, never a second effect.

import { Code, ConnectError } from "@connectrpc/connect";

import { BudgetError, decodeError, type OncejobError } from "./errors.js";

/**
 * RetryPolicy bounds the retries of one call: by attempts, and always by
 * the call's deadline (timeoutMs) and signal. The wait before retry n is
 * uniform in [0, min(maxBackoffMs, initialBackoffMs * multiplier^(n-1)))
 * ("full jitter"), or exactly the delay of a google.rpc.RetryInfo the
 * server sent. Missing fields take the defaults of DEFAULT_RETRY_POLICY.
 */
export interface RetryPolicy {
  /** Every attempt, the first included; 1 turns retries off. Default 6. */
  maxAttempts?: number;
  /** Caps the first wait; default 100. */
  initialBackoffMs?: number;
  /** Caps every wait but a RetryInfo delay; default 5000. */
  maxBackoffMs?: number;
  /** Grows the cap from one retry to the next; default 2. */
  multiplier?: number;
  /** Bounds one attempt; default none (an attempt may use the whole deadline). */
  attemptTimeoutMs?: number;
  /** The fraction of the cap to wait, in [0, 1); default Math.random. */
  jitter?: () => number;
  /** Called after a failed attempt that will be retried, with the wait before the next. */
  onRetry?: (e: { attempt: number; error: OncejobError; waitMs: number }) => void;
}

export const DEFAULT_RETRY_POLICY: Required<Omit<RetryPolicy, "attemptTimeoutMs" | "onRetry">> = {
  maxAttempts: 6,
  initialBackoffMs: 100,
  maxBackoffMs: 5000,
  multiplier: 2,
  jitter: Math.random,
};

type Resolved = Required<Omit<RetryPolicy, "attemptTimeoutMs" | "onRetry">> & Pick<RetryPolicy, "attemptTimeoutMs" | "onRetry">;

export function resolvePolicy(p: RetryPolicy = {}): Resolved {
  const d = DEFAULT_RETRY_POLICY;
  return {
    maxAttempts: p.maxAttempts && p.maxAttempts > 0 ? p.maxAttempts : d.maxAttempts,
    initialBackoffMs: p.initialBackoffMs && p.initialBackoffMs > 0 ? p.initialBackoffMs : d.initialBackoffMs,
    maxBackoffMs: p.maxBackoffMs && p.maxBackoffMs > 0 ? p.maxBackoffMs : d.maxBackoffMs,
    multiplier: p.multiplier && p.multiplier >= 1 ? p.multiplier : d.multiplier,
    jitter: p.jitter ?? d.jitter,
    attemptTimeoutMs: p.attemptTimeoutMs,
    onRetry: p.onRetry,
  };
}

/** waitMs is the wait before retry n (n >= 1) after err, reported to onRetry. */
export function waitMs(p: Resolved, n: number, err: OncejobError): number {
  let d = err.retryDelayMs;
  if (d === undefined) {
    d = p.jitter() * Math.min(p.initialBackoffMs * p.multiplier ** (n - 1), p.maxBackoffMs);
  }
  d = Math.max(d, 0);
  p.onRetry?.({ attempt: n, error: err, waitMs: d });
  return d;
}

// brokenConnection says whether a Connect error is a transport's failure
// after the request may have been sent: fetch's network errors, a stream
// that ended without its end message or trailers.
function brokenConnection(err: ConnectError): boolean {
  if (err.code !== Code.Unknown && err.code !== Code.Internal) return false;
  if (err.cause instanceof TypeError) return true;
  return /missing EndStreamResponse|missing trailer|premature|terminated|network|fetch failed|failed to fetch|load failed|socket hang up|ECONNRESET|ECONNREFUSED|EPIPE|RST_STREAM/i.test(err.rawMessage);
}

/** retryable says whether an attempt that failed with err may be made again. */
export function retryable(err: unknown): boolean {
  const ce = err instanceof ConnectError ? err : err instanceof Error && err.cause instanceof ConnectError ? err.cause : undefined;
  if (!ce) return false;
  switch (ce.code) {
    case Code.Unavailable:
    case Code.ResourceExhausted:
    case Code.DeadlineExceeded:
      return true;
  }
  return brokenConnection(ce);
}

/** A deadline for a whole logical call: the caller's signal and timeout, in one signal. */
export interface Deadline {
  signal: AbortSignal;
  /** Whether the timeout (not the caller's signal) ended it. */
  expired(): boolean;
  done(): void;
}

export function deadline(timeoutMs: number | undefined, parent: AbortSignal | undefined): Deadline {
  const ac = new AbortController();
  let expired = false;
  const onAbort = () => ac.abort(parent?.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  parent?.addEventListener("abort", onAbort);
  const timer =
    timeoutMs !== undefined && timeoutMs > 0
      ? setTimeout(() => {
          expired = true;
          ac.abort(new ConnectError("deadline exceeded", Code.DeadlineExceeded));
        }, timeoutMs)
      : undefined;
  return {
    signal: ac.signal,
    expired: () => expired,
    done: () => {
      if (timer !== undefined) clearTimeout(timer);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}

/** sleep waits ms, or rejects when signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * withRetries makes one logical call: attempt(signal, timeoutMs) runs each
 * attempt (the caller passes the same key to every one), until one
 * succeeds, an error is not retryable, the attempts run out or the
 * deadline comes (a BudgetError for the last two).
 */
export async function withRetries<T>(
  p: Resolved,
  dl: Deadline,
  key: string,
  attempt: (signal: AbortSignal, timeoutMs: number | undefined) => Promise<T>,
): Promise<T> {
  let last: OncejobError | undefined;
  for (let n = 1; ; n++) {
    try {
      return await attempt(dl.signal, p.attemptTimeoutMs);
    } catch (err) {
      if (dl.expired()) {
        if (last) throw new BudgetError(n, last, true);
        throw decodeError(new ConnectError("deadline exceeded", Code.DeadlineExceeded), key);
      }
      const e = decodeError(err, key);
      if (dl.signal.aborted || !retryable(err)) throw e;
      last = e;
      if (n >= p.maxAttempts) {
        if (p.maxAttempts > 1) throw new BudgetError(n, e, false);
        throw e;
      }
      try {
        await sleep(waitMs(p, n, e), dl.signal);
      } catch {
        if (dl.expired()) throw new BudgetError(n, e, true);
        throw e;
      }
    }
  }
}
