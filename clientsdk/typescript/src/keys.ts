// WorkID and SubmitKey: the idempotency keys the SDKs derive, bit for bit
// as the Go SDK (clientsdk.WorkID, clientsdk.SubmitKey) and the Python one
// (work_id, submit_key). docs/keys.md is the spec, rule by rule;
// clientsdk/testdata/workid_vectors.json holds the cases every language
// passes, and the differential test (clientsdk/keys_ts_differential_ext_test.go)
// runs generated inputs through Go and this module.

import { sha256 } from "@noble/hashes/sha2";
import { bytesToHex } from "@noble/hashes/utils";

/** Arrays and objects nest at most this deep in a WorkID payload (Go: MaxWorkIDDepth). */
export const MAX_WORK_ID_DEPTH = 128;

/** A JSON value as a WorkID payload takes it. */
export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [name: string]: JsonValue };

/** KeyError is the refusal of an input that has no key (Go returns an error, Python raises ValueError). */
export class KeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeyError";
  }
}

// A payload as canonical JSON sees it: objects as Maps (so "__proto__" is
// a name like any other), numbers as doubles.
type Node = null | boolean | number | string | Node[] | Map<string, Node>;

const KIND = /^[A-Za-z0-9._/-]{1,128}$/;
const INDEX = /^(0|[1-9][0-9]*)$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * workId returns the WorkID of payload: the lower-case hex sha256 of
 * kind ":" version ":" canonical JSON of payload without the members the
 * RFC 6901 pointers of drop name.
 *
 * kind: 1-128 characters of A-Z a-z 0-9 . _ / -; version: an integer >= 1;
 * payload: JSON values (objects, arrays, strings, numbers, bigints,
 * booleans, null). Throws KeyError where Go's WorkID returns an error.
 */
export function workId(kind: string, version: number, payload: unknown, drop: readonly string[] = []): string {
  return bytesToHex(sha256(utf8(preimage(kind, version, payload, drop))));
}

/** canonicalJson returns the server's canonical JSON of value (docs/keys.md, "canonical"). */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  write(out, toNode(value));
  return out.join("");
}

/** The fields of a submission its key covers: those the server fingerprints. */
export interface SubmitKeyInput {
  pipeline?: string;
  modelProfile?: string;
  params?: { [name: string]: JsonValue };
  document?: {
    name?: string;
    mediaType?: string;
    content?: { case: "text"; value: string } | { case: "data"; value: Uint8Array } | { case: undefined; value?: undefined };
  };
}

/**
 * submitKey derives the idempotency key of a submission: the WorkID of kind
 * "oncejob.submit", version 1, over the request's fields as sent, so the
 * derived key never meets IDEMPOTENCY_KEY_REUSED; labels are not in it.
 */
export function submitKey(req: SubmitKeyInput): string {
  const content = req.document?.content;
  let data: Uint8Array = new Uint8Array(0);
  if (content?.case === "text") {
    if (LONE_SURROGATE.test(content.value)) {
      throw new KeyError("oncejob: SubmitKey: the text document is not valid Unicode (a lone surrogate)");
    }
    data = utf8(content.value);
  } else if (content?.case === "data") {
    data = content.value;
  }
  return workId("oncejob.submit", 1, {
    pipeline: req.pipeline ?? "",
    document_sha256: bytesToHex(sha256(data)),
    media_type: req.document?.mediaType ?? "",
    document_name: req.document?.name ?? "",
    model_profile: req.modelProfile ?? "",
    params: req.params ?? {},
  });
}

/** documentSha256 is the lower-case hex sha256 of bytes. */
export function sha256Hex(bytes: Uint8Array): string {
  return bytesToHex(sha256(bytes));
}

function preimage(kind: string, version: number, payload: unknown, drop: readonly string[]): string {
  if (typeof kind !== "string" || !KIND.test(kind)) {
    throw new KeyError(`oncejob: WorkID kind ${JSON.stringify(kind)}: 1-128 characters from A-Z a-z 0-9 . _ / -`);
  }
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 1) {
    throw new KeyError(`oncejob: WorkID version must be an integer >= 1, got ${String(version)}`);
  }
  const pointers = drop.map(parsePointer);
  let node = toNode(payload);
  for (const tokens of pointers) {
    node = removeAt(node, tokens);
  }
  const out: string[] = [`${kind}:${version}:`];
  write(out, node);
  return out.join("");
}

// toNode checks value (depth first, without recursion, so a deep value is
// refused before anything recurses) and converts it.
function toNode(value: unknown): Node {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v === "string") {
      checkString(v);
    } else if (typeof v === "object" && v !== null) {
      if (depth + 1 > MAX_WORK_ID_DEPTH) {
        throw new KeyError(`oncejob: WorkID: arrays and objects nest deeper than ${MAX_WORK_ID_DEPTH}`);
      }
      if (Array.isArray(v)) {
        for (const e of v) stack.push([e, depth + 1]);
      } else {
        const proto = Object.getPrototypeOf(v);
        if (proto !== Object.prototype && proto !== null) {
          throw new KeyError(`oncejob: WorkID: cannot canonicalise ${proto?.constructor?.name ?? "object"}`);
        }
        for (const [k, e] of Object.entries(v)) {
          checkString(k);
          stack.push([e, depth + 1]);
        }
      }
    }
  }
  return convert(value);
}

function convert(v: unknown): Node {
  switch (typeof v) {
    case "string":
    case "boolean":
      return v;
    case "number":
      return v; // checked when written: a number a drop removes is never refused (as in Go)
    case "bigint":
      return Number(v);
    case "object":
      if (v === null) return null;
      if (Array.isArray(v)) return v.map(convert);
      return new Map(Object.entries(v).map(([k, e]) => [k, convert(e)]));
  }
  throw new KeyError(`oncejob: WorkID: cannot canonicalise ${typeof v}`);
}

function checkString(s: string): void {
  const m = LONE_SURROGATE.exec(s);
  if (m) {
    const hex = m[0].charCodeAt(0).toString(16).padStart(4, "0");
    throw new KeyError(`oncejob: WorkID: a string holds a lone surrogate \\u${hex}: not valid Unicode`);
  }
}

function checkNumber(f: number): void {
  if (!Number.isFinite(f)) {
    throw new KeyError(`oncejob: WorkID: number ${f} has no JSON form`);
  }
}

function parsePointer(p: string): string[] {
  if (typeof p !== "string" || !p.startsWith("/")) {
    throw new KeyError(`oncejob: WorkID: drop pointer ${JSON.stringify(p)} must start with '/' (RFC 6901)`);
  }
  const tokens = p.slice(1).split("/");
  for (const t of tokens) {
    if (/~(?![01])/.test(t)) {
      throw new KeyError(`oncejob: WorkID: drop pointer ${JSON.stringify(p)}: '~' must be followed by 0 or 1`);
    }
  }
  return tokens.map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"));
}

function removeAt(v: Node, tokens: string[]): Node {
  const [head, ...rest] = tokens;
  if (v instanceof Map) {
    if (v.has(head)) {
      if (rest.length > 0) v.set(head, removeAt(v.get(head)!, rest));
      else v.delete(head);
    }
  } else if (Array.isArray(v)) {
    if (INDEX.test(head) && Number(head) < v.length) {
      const i = Number(head);
      if (rest.length > 0) v[i] = removeAt(v[i], rest);
      else v.splice(i, 1);
    }
  }
  return v;
}

// Go's unicode.IsSpace, which strings.TrimSpace trims.
const GO_SPACE = "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";

function trimGoSpace(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && GO_SPACE.includes(s[start])) start++;
  while (end > start && GO_SPACE.includes(s[end - 1])) end--;
  return s.slice(start, end);
}

function write(out: string[], v: Node): void {
  if (v === null) {
    out.push("null");
  } else if (typeof v === "boolean") {
    out.push(v ? "true" : "false");
  } else if (typeof v === "string") {
    writeString(out, trimGoSpace(v));
  } else if (typeof v === "number") {
    out.push(formatNumber(v));
  } else if (Array.isArray(v)) {
    out.push("[");
    v.forEach((e, i) => {
      if (i > 0) out.push(",");
      write(out, e);
    });
    out.push("]");
  } else {
    out.push("{");
    [...v.keys()].sort(compareCodePoints).forEach((name, i) => {
      if (i > 0) out.push(",");
      writeString(out, name);
      out.push(":");
      write(out, v.get(name)!);
    });
    out.push("}");
  }
}

// compareCodePoints orders strings as their UTF-8 bytes are ordered: by code
// point, which UTF-16 code units are not (U+E000 sorts after U+10000's
// surrogates in UTF-16).
function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const ca = ia.next();
    const cb = ib.next();
    if (ca.done || cb.done) return ca.done && cb.done ? 0 : ca.done ? -1 : 1;
    const d = ca.value.codePointAt(0)! - cb.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

const SHORT_ESCAPES: Record<string, string> = { '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

// writeString quotes s as Go's encoding/json does without HTML escaping.
function writeString(out: string[], s: string): void {
  out.push(
    '"' +
      s.replace(/["\\\u0000-\u001f\u2028\u2029]/g, (c) => SHORT_ESCAPES[c] ?? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")) +
      '"',
  );
}

// formatNumber: 0 for either zero, plain digits for an integral value below
// 2^53, else Go's strconv.FormatFloat(f, 'g', -1, 64).
function formatNumber(f: number): string {
  checkNumber(f);
  if (f === 0) return "0";
  if (Number.isInteger(f) && Math.abs(f) < 2 ** 53) return f.toFixed(0);
  const [mant, e] = Math.abs(f).toExponential().split("e"); // shortest round-trip digits
  const digits = mant.replace(".", "");
  const exp = Number(e);
  const sign = f < 0 ? "-" : "";
  if (exp < -4 || exp >= 6) {
    const m = digits.length > 1 ? digits[0] + "." + digits.slice(1) : digits;
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  const dp = exp + 1; // digits before the decimal point
  if (dp <= 0) return `${sign}0.${"0".repeat(-dp)}${digits}`;
  if (dp >= digits.length) return sign + digits + "0".repeat(dp - digits.length);
  return `${sign}${digits.slice(0, dp)}.${digits.slice(dp)}`;
}

const encoder = new TextEncoder();

function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}
