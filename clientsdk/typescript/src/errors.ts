// Typed errors: a call's failure as the server said it, with the
// google.rpc details it sent (ErrorInfo's reason, BadRequest's fields,
// RetryInfo's delay), as the Go SDK's StatusError, KeyReusedError,
// InvalidRequestError, PreconditionError and BudgetError.

import { Code, ConnectError } from "@connectrpc/connect";

import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/** The gRPC code names, as the server's docs and logs write them. */
export type CodeName =
  | "CANCELLED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

const CODE_NAMES: Record<number, CodeName> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

/** A field of the request the server refused, from a google.rpc.BadRequest. */
export interface FieldViolation {
  field: string;
  description: string;
  reason: string;
}

/**
 * OncejobError is a call's failure: its gRPC code, the server's message,
 * and the google.rpc details. Subclasses name the failures a caller acts
 * on: KeyReusedError, InvalidRequestError, PreconditionError, BudgetError.
 */
export class OncejobError extends Error {
  /** The gRPC code, as a name ("NOT_FOUND"). */
  readonly codeName: CodeName;
  /** The ErrorInfo's reason ("IDEMPOTENCY_KEY_REUSED"), "" if none. */
  readonly reason: string;
  /** The ErrorInfo's metadata (a watch's "after_seq", a request id...). */
  readonly metadata: Record<string, string>;
  /** The BadRequest's field violations. */
  readonly fieldViolations: FieldViolation[];
  /** The RetryInfo's delay in milliseconds, undefined if none. */
  readonly retryDelayMs: number | undefined;
  /** The idempotency key of the call, "" if it had none. */
  readonly key: string;

  constructor(
    readonly code: Code,
    message: string,
    opts: { reason?: string; metadata?: Record<string, string>; fieldViolations?: FieldViolation[]; retryDelayMs?: number; key?: string; cause?: unknown } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = "OncejobError";
    this.codeName = CODE_NAMES[code] ?? "UNKNOWN";
    this.reason = opts.reason ?? "";
    this.metadata = opts.metadata ?? {};
    this.fieldViolations = opts.fieldViolations ?? [];
    this.retryDelayMs = opts.retryDelayMs;
    this.key = opts.key ?? "";
  }
}

/** The idempotency key was used for another request (INVALID_ARGUMENT, IDEMPOTENCY_KEY_REUSED). */
export class KeyReusedError extends OncejobError {
  override name = "KeyReusedError";
}

/** The request or its key is invalid (INVALID_ARGUMENT); fieldViolations say which fields. */
export class InvalidRequestError extends OncejobError {
  override name = "InvalidRequestError";
}

/** The job's status does not allow the request (FAILED_PRECONDITION). */
export class PreconditionError extends OncejobError {
  override name = "PreconditionError";
}

/** Retrying ended the call: the attempts ran out, or the deadline came. `last` is the last attempt's error. */
export class BudgetError extends OncejobError {
  override name = "BudgetError";
  constructor(
    readonly attempts: number,
    readonly last: OncejobError,
    readonly deadline: boolean,
  ) {
    super(deadline ? Code.DeadlineExceeded : last.code, `oncejob: gave up after ${attempts} attempts${deadline ? " (deadline)" : ""}: ${last.message}`, {
      reason: last.reason,
      metadata: last.metadata,
      fieldViolations: last.fieldViolations,
      retryDelayMs: last.retryDelayMs,
      key: last.key,
      cause: last,
    });
  }
}

/** decodeError turns anything a call threw into an OncejobError with the status's details. */
export function decodeError(err: unknown, key = ""): OncejobError {
  if (err instanceof OncejobError) return err;
  const ce = ConnectError.from(err);
  const info = ce.findDetails(ErrorInfoSchema)[0];
  const badRequest = ce.findDetails(BadRequestSchema)[0];
  const retry = ce.findDetails(RetryInfoSchema)[0]?.retryDelay;
  const opts = {
    reason: info?.reason,
    metadata: info ? { ...info.metadata } : {},
    fieldViolations: (badRequest?.fieldViolations ?? []).map((f) => ({ field: f.field, description: f.description, reason: f.reason })),
    retryDelayMs: retry ? Number(retry.seconds) * 1000 + Math.floor(retry.nanos / 1e6) : undefined,
    key,
    cause: ce,
  };
  const message = `${CODE_NAMES[ce.code] ?? "UNKNOWN"}: ${ce.rawMessage}`;
  if (ce.code === Code.InvalidArgument) {
    return info?.reason === "IDEMPOTENCY_KEY_REUSED" ? new KeyReusedError(ce.code, message, opts) : new InvalidRequestError(ce.code, message, opts);
  }
  if (ce.code === Code.FailedPrecondition) return new PreconditionError(ce.code, message, opts);
  return new OncejobError(ce.code, message, opts);
}
