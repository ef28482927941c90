// gen.mjs writes vectors.json: webhook requests signed by the official
// Standard Webhooks library (npm "standardwebhooks", pinned in
// package-lock.json), and what an oncejob receiver must answer to each.
// Both receivers - clientsdk/receiver (Go) and oncejob.receiver (Python) -
// check every vector; docs/architecture.md, "Receivers".
//
//	cd clientsdk/testdata/webhooks && npm ci && node gen.mjs > vectors.json
//
// Everything is deterministic (secrets from fixed labels, timestamps from a
// fixed "now"), so a second run writes the same file; TestWebhookVectors
// (clientsdk/receiver) runs it and compares. Before writing, each vector is
// sent as raw HTTP to a Node http server whose handler runs the library's
// verify at that "now" - so duplicate header lines are combined as Node
// combines them (", "), as the library meets them in its own runtime - and
// the library's verdict (accepted, or which error) must be the vector's:
// the receivers answer exactly what the official library answers.
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { connect } from "node:net";
import { createRequire } from "node:module";
import { Webhook } from "standardwebhooks";

const require = createRequire(import.meta.url);
const library = `standardwebhooks ${require("standardwebhooks/package.json").version}`;

// NOW is the receivers' clock for every vector; TOLERANCE is theirs too.
const NOW = 1796256000; // 2026-12-01T00:00:00Z
const TOLERANCE = 300;

function secret(label, bytes = 32) {
  let key = Buffer.alloc(0);
  for (let i = 0; key.length < bytes; i++) {
    key = Buffer.concat([key, createHash("sha256").update(`${label}/${i}`).digest()]);
  }
  return "whsec_" + key.subarray(0, bytes).toString("base64");
}

const A = secret("oncejob vectors: secret A");
const B = secret("oncejob vectors: secret B (the rotation's new secret)");
const C = secret("oncejob vectors: secret C (nobody's)");
const SHORT = secret("oncejob vectors: a 16-byte secret", 16);
const LONG = secret("oncejob vectors: a 64-byte secret", 64);

function event(id, output, extra = {}) {
  return JSON.stringify({
    version: 1, type: "job.succeeded", id, time: "2026-12-01T00:00:00.000000Z",
    data: {
      job_id: id.split(":")[1], tenant: "acme", pipeline: "summarize", pipeline_version: 1,
      prompt_version: "1", model_profile: "default", dedup_key: "dedup:v1:00", deduplicated_from: null,
      generation: 0, status: "succeeded", stage: "published", attempt: 1, output, error: null,
      usage: { prompt_tokens: 10, completion_tokens: 5, cost_micros: 0, llm_calls: 1 },
      ...extra,
    },
  });
}

const vectors = [];

// add signs body as id at ts with each of signers, lets edit change the
// request afterwards (a tamperer, a proxy; a header may become a list of
// lines), and records the expectation: verify is "ok", "missing_headers",
// "stale" or "signature"; status is the handler's answer (200 applied, 400
// not an event, 401 not verified). nowMs is the receivers' clock in
// milliseconds when it is not NOW: the library compares whole seconds.
function add(name, { id, ts = NOW, body, signers = [A], receiver = [A], edit, verify, status, nowMs }) {
  const headers = {
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": signers.map((s) => new Webhook(s).sign(id, new Date(ts * 1000), body)).join(" "),
  };
  const req = { headers, body };
  if (edit) edit(req);
  vectors.push({ name, secrets: receiver, headers: req.headers, body: req.body, verify, status, ...(nowMs !== undefined ? { now_ms: nowMs } : {}) });
}

// libraryVerdicts sends every vector to a Node http server as raw HTTP,
// header lines as listed, and has the library verify what the server
// parsed, at the vector's now, with each of the receiver's secrets: "ok"
// when any accepts, else the verdict its error names.
async function libraryVerdicts() {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const vec = vectors[Number(req.url.slice(1))];
      const realNow = Date.now;
      Date.now = () => vec.now_ms ?? NOW * 1000;
      let verdict;
      try {
        for (const s of vec.secrets) {
          try {
            new Webhook(s).verify(Buffer.concat(chunks), req.headers, { jsonParse: false });
            verdict = "ok";
            break;
          } catch (e) {
            verdict ??= reason(e.message);
          }
        }
      } finally {
        Date.now = realNow;
      }
      res.end(verdict);
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  try {
    const out = [];
    for (let i = 0; i < vectors.length; i++) out.push(await send(port, i, vectors[i]));
    return out;
  } finally {
    server.close();
  }
}

function reason(message) {
  if (/^(Missing required headers|Invalid Signature Headers)$/.test(message)) return "missing_headers";
  if (/^Message timestamp too (old|new)$/.test(message)) return "stale";
  if (message === "No matching signature found") return "signature";
  throw new Error(`the library refused with ${message}`);
}

function send(port, i, vec) {
  const body = Buffer.from(vec.body, "utf8");
  let head = `POST /${i} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: ${body.length}\r\n`;
  for (const [k, v] of Object.entries(vec.headers)) {
    for (const line of Array.isArray(v) ? v : [v]) head += `${k}: ${line}\r\n`;
  }
  return new Promise((ok, fail) => {
    const sock = connect(port, "127.0.0.1", () => sock.end(Buffer.concat([Buffer.from(head + "\r\n", "latin1"), body])));
    const chunks = [];
    sock.on("data", (c) => chunks.push(c));
    sock.on("error", fail);
    sock.on("end", () => {
      const answer = Buffer.concat(chunks).toString("latin1");
      const m = /^HTTP\/1\.1 200 [^]*?\r\n\r\n([^]*)$/.exec(answer);
      if (!m) return fail(new Error(`${vec.name}: ${answer}`));
      ok(m[1].includes("\r\n") ? unchunk(m[1]) : m[1]);
    });
  });
}

// unchunk reads a chunked body of one chunk.
function unchunk(s) {
  const [size, rest] = s.split("\r\n");
  return rest.slice(0, parseInt(size, 16));
}

const id = (n) => `job:0b7e4a3c-${String(n).padStart(4, "0")}:job.succeeded:0`;
const plain = (n) => event(id(n), { summary: "Invoice 42: 3 licences, EUR 1,200." });

// Accepted.
add("valid", { id: id(1), body: plain(1), verify: "ok", status: 200 });
add("unicode body", {
  id: id(2), body: event(id(2), { summary: "Grüße, 日本語, emoji 👋🏽, line\u2028separator, é (NFC) e\u0301 (NFD), \u0000 escaped" }),
  verify: "ok", status: 200,
});
add("body as sent: pretty-printed with CRLF and a trailing newline", {
  id: id(3), body: JSON.stringify(JSON.parse(plain(3)), null, 2).replace(/\n/g, "\r\n") + "\n", verify: "ok", status: 200,
});
add("16-byte secret", { id: id(4), body: plain(4), signers: [SHORT], receiver: [SHORT], verify: "ok", status: 200 });
add("64-byte secret", { id: id(5), body: plain(5), signers: [LONG], receiver: [LONG], verify: "ok", status: 200 });
add("rotation: signed with new and old, receiver knows the old", {
  id: id(6), body: plain(6), signers: [B, A], receiver: [A], verify: "ok", status: 200,
});
add("rotation: signed with new and old, receiver knows the new", {
  id: id(7), body: plain(7), signers: [B, A], receiver: [B], verify: "ok", status: 200,
});
add("rotation: receiver knows new and old, signed with the old", {
  id: id(8), body: plain(8), signers: [A], receiver: [B, A], verify: "ok", status: 200,
});
add("rotation: receiver knows new and old, signed with the new", {
  id: id(9), body: plain(9), signers: [B], receiver: [B, A], verify: "ok", status: 200,
});
add("several signatures: an unknown version and a foreign one before the match", {
  id: id(10), body: plain(10), signers: [C, A], receiver: [A],
  edit: (r) => { r.headers["webhook-signature"] = "v2,bm90IGEgdjEgc2lnbmF0dXJl " + r.headers["webhook-signature"]; },
  verify: "ok", status: 200,
});
add("timestamp at the tolerance, in the past", { id: id(11), ts: NOW - TOLERANCE, body: plain(11), verify: "ok", status: 200 });
add("timestamp at the tolerance, in the future", { id: id(12), ts: NOW + TOLERANCE, body: plain(12), verify: "ok", status: 200 });
add("timestamp with a plus sign and leading zeros (the signed number is the same)", {
  id: id(13), body: plain(13), edit: (r) => { r.headers["webhook-timestamp"] = "+00" + NOW; }, verify: "ok", status: 200,
});
add("timestamp with a fraction: the library's parseInt reads the integer part", {
  id: id(16), body: plain(16), edit: (r) => { r.headers["webhook-timestamp"] = `${NOW}.0`; }, verify: "ok", status: 200,
});
add("timestamp with a fraction and more: parseInt stops at the first non-digit", {
  id: id(17), body: plain(17), edit: (r) => { r.headers["webhook-timestamp"] = `${NOW}.9xyz`; }, verify: "ok", status: 200,
});
add("timestamp 300.999 s old: the library compares whole seconds of now", {
  id: id(18), ts: NOW - TOLERANCE, nowMs: NOW * 1000 + 999, body: plain(18), verify: "ok", status: 200,
});
add("timestamp 300 s ahead of a now of x.999 s", {
  id: id(19), ts: NOW + TOLERANCE, nowMs: NOW * 1000 + 999, body: plain(19), verify: "ok", status: 200,
});
add("header names in mixed case", {
  id: id(14), body: plain(14),
  edit: (r) => {
    r.headers = { "Webhook-Id": r.headers["webhook-id"], "WEBHOOK-TIMESTAMP": r.headers["webhook-timestamp"], "Webhook-Signature": r.headers["webhook-signature"] };
  },
  verify: "ok", status: 200,
});
add("large body (64 KiB of output)", { id: id(15), body: event(id(15), { summary: "x".repeat(65536) }), verify: "ok", status: 200 });

// Verified, but not an oncejob event for this request: 400.
add("empty body", { id: id(20), body: "", verify: "ok", status: 400 });
add("JSON that is not an event", { id: id(21), body: `{"hello": 1}`, verify: "ok", status: 400 });
add("envelope version 2", { id: id(22), body: plain(22).replace(`"version":1`, `"version":2`), verify: "ok", status: 400 });
add("event id is not the webhook-id", { id: id(23), body: plain(24), verify: "ok", status: 400 });
add("not JSON", { id: id(25), body: "job.succeeded 0b7e4a3c", verify: "ok", status: 400 });

// Refused: 401, nothing applied.
add("tampered body: one digit", {
  id: id(30), body: plain(30), edit: (r) => { r.body = r.body.replace("1,200", "1,900"); }, verify: "signature", status: 401,
});
add("tampered body: NFC to NFD", {
  id: id(31), body: event(id(31), { summary: "Café" }), edit: (r) => { r.body = r.body.replace("é", "e\u0301"); },
  verify: "signature", status: 401,
});
add("tampered body: a trailing newline", {
  id: id(32), body: plain(32), edit: (r) => { r.body += "\n"; }, verify: "signature", status: 401,
});
add("tampered webhook-id", {
  id: id(33), body: plain(33), edit: (r) => { r.headers["webhook-id"] = id(34); }, verify: "signature", status: 401,
});
add("tampered timestamp, still within the tolerance", {
  id: id(35), body: plain(35), edit: (r) => { r.headers["webhook-timestamp"] = String(NOW + 1); }, verify: "signature", status: 401,
});
add("wrong secret", { id: id(36), body: plain(36), signers: [B], receiver: [A], verify: "signature", status: 401 });
add("rotation: receiver knows new and old, signed with neither", {
  id: id(37), body: plain(37), signers: [C], receiver: [B, A], verify: "signature", status: 401,
});
add("signature without its v1, prefix", {
  id: id(38), body: plain(38), edit: (r) => { r.headers["webhook-signature"] = r.headers["webhook-signature"].slice(3); },
  verify: "signature", status: 401,
});
add("signature with an upper-case version", {
  id: id(39), body: plain(39), edit: (r) => { r.headers["webhook-signature"] = "V" + r.headers["webhook-signature"].slice(1); },
  verify: "signature", status: 401,
});
add("signature truncated by one character", {
  id: id(40), body: plain(40), edit: (r) => { r.headers["webhook-signature"] = r.headers["webhook-signature"].slice(0, -1); },
  verify: "signature", status: 401,
});
add("signatures separated by a comma, not a space", {
  id: id(41), body: plain(41), signers: [C, A], edit: (r) => { r.headers["webhook-signature"] = r.headers["webhook-signature"].replace(" ", ","); },
  verify: "signature", status: 401,
});
add("stale timestamp: one second past the tolerance", { id: id(42), ts: NOW - TOLERANCE - 1, body: plain(42), verify: "stale", status: 401 });
add("stale timestamp: 301 s old exactly", {
  id: id(46), ts: NOW - TOLERANCE - 1, nowMs: NOW * 1000, body: plain(46), verify: "stale", status: 401,
});
add("future timestamp: 301 s ahead of a now of x.999 s", {
  id: id(47), ts: NOW + TOLERANCE + 1, nowMs: NOW * 1000 + 999, body: plain(47), verify: "stale", status: 401,
});
add("future timestamp: one second past the tolerance", { id: id(43), ts: NOW + TOLERANCE + 1, body: plain(43), verify: "stale", status: 401 });
add("stale timestamp and a wrong secret: the timestamp is checked first", {
  id: id(44), ts: NOW - 3600, body: plain(44), signers: [C], verify: "stale", status: 401,
});
add("timestamp in milliseconds", {
  id: id(45), body: plain(45), edit: (r) => { r.headers["webhook-timestamp"] = String(NOW * 1000); }, verify: "stale", status: 401,
});
for (const h of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
  add(`missing ${h}`, { id: id(50), body: plain(50), edit: (r) => { delete r.headers[h]; }, verify: "missing_headers", status: 401 });
  add(`empty ${h}`, { id: id(50), body: plain(50), edit: (r) => { r.headers[h] = ""; }, verify: "missing_headers", status: 401 });
}
add("timestamp not a number", {
  id: id(51), body: plain(51), edit: (r) => { r.headers["webhook-timestamp"] = "yesterday"; }, verify: "missing_headers", status: 401,
});
add("timestamp past int64: a number far in the future", {
  id: id(52), body: plain(52), edit: (r) => { r.headers["webhook-timestamp"] = "99999999999999999999"; }, verify: "stale", status: 401,
});
add("timestamp in hex: parseInt reads the 0", {
  id: id(53), body: plain(53), edit: (r) => { r.headers["webhook-timestamp"] = "0x6B0E6A00"; }, verify: "stale", status: 401,
});
add("timestamp with only a sign", {
  id: id(54), body: plain(54), edit: (r) => { r.headers["webhook-timestamp"] = "+"; }, verify: "missing_headers", status: 401,
});
add("timestamp with a fraction only", {
  id: id(55), body: plain(55), edit: (r) => { r.headers["webhook-timestamp"] = ".5"; }, verify: "missing_headers", status: 401,
});

// Duplicate header lines: Node's http combines them with ", ", and the
// library reads the combined value.
add("webhook-id on two lines: the signed id is neither", {
  id: id(60), body: plain(60), edit: (r) => { r.headers["webhook-id"] = [id(60), id(60)]; }, verify: "signature", status: 401,
});
add("webhook-id on two lines, signed as Node combines them", {
  id: `${id(61)}, ${id(61)}`, body: plain(61),
  edit: (r) => { r.headers["webhook-id"] = [id(61), id(61)]; }, verify: "ok", status: 400,
});
add("webhook-timestamp on two lines: parseInt reads the first", {
  id: id(62), body: plain(62), edit: (r) => { r.headers["webhook-timestamp"] = [String(NOW), String(NOW + 1)]; }, verify: "ok", status: 200,
});
add("webhook-timestamp on two lines, the first stale", {
  id: id(63), body: plain(63), edit: (r) => { r.headers["webhook-timestamp"] = [String(NOW - 3600), String(NOW)]; }, verify: "stale", status: 401,
});
add("webhook-signature on two lines, the match on the second", {
  id: id(64), body: plain(64), signers: [A],
  edit: (r) => { r.headers["webhook-signature"] = [new Webhook(C).sign(id(64), new Date(NOW * 1000), plain(64)), r.headers["webhook-signature"]]; },
  verify: "ok", status: 200,
});
add("webhook-signature on two lines, the match on the first: it ends in the separator's comma", {
  id: id(65), body: plain(65), signers: [A],
  edit: (r) => { r.headers["webhook-signature"] = [r.headers["webhook-signature"], new Webhook(C).sign(id(65), new Date(NOW * 1000), plain(65))]; },
  verify: "signature", status: 401,
});
add("webhook-signature on two lines, the first with two signatures, the match before the line's end", {
  id: id(66), body: plain(66), signers: [A, C],
  edit: (r) => { r.headers["webhook-signature"] = [r.headers["webhook-signature"], "v1,bm90IGEgbWF0Y2g="]; },
  verify: "ok", status: 200,
});

const verdicts = await libraryVerdicts();
vectors.forEach((vec, i) => {
  if (verdicts[i] !== vec.verify) throw new Error(`${vec.name}: expected verify ${vec.verify}, the library says ${verdicts[i]}`);
});

process.stdout.write(JSON.stringify({
  comment: "Written by gen.mjs with the official Standard Webhooks library; do not edit. verify: ok | missing_headers | stale | signature; status: the receiver's HTTP answer; a header given as a list is sent as that many lines; now_ms, when given, is the receivers' clock instead of now.",
  library, now: NOW, tolerance_seconds: TOLERANCE, vectors,
}, null, 1) + "\n");
