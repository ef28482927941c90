// The TypeScript side of the Go SDK's differential key test
// (clientsdk/keys_ts_differential_ext_test.go): reads one JSON request a
// line on stdin and answers one JSON line on stdout, {"out": ...} or
// {"err": ...}, with the package's normalizeUrl, workId and submitKey. A
// request's strings carry a Go string's invalid UTF-8 bytes as lone
// surrogates U+DC80-U+DCFF, which is how such a byte reaches a JS string
// (as in the Python oracle).
import { createInterface } from "node:readline";

import { KeyError, submitKey, workId } from "../dist/index.js";
import { normalizeUrl } from "../dist/url.js";

function answer(req) {
  switch (req.op) {
    case "url":
      return normalizeUrl(req.in);
    case "workid":
      return workId(req.kind, req.version, JSON.parse(req.payload), req.drop ?? []);
    case "submit": {
      const params = JSON.parse(req.params);
      if (typeof params !== "object" || params === null || Array.isArray(params)) throw new KeyError("params is not an object");
      return submitKey({
        pipeline: req.pipeline,
        modelProfile: req.model_profile,
        params,
        document: { name: req.name, mediaType: req.media_type, content: { case: "text", value: req.text } },
      });
    }
  }
  throw new KeyError(`unknown op ${req.op}`);
}

const out = [];
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  let resp;
  try {
    resp = { out: answer(JSON.parse(line)) };
  } catch (e) {
    // A refusal is a KeyError, or the JSON text itself not parsing (Go's
    // decoder refuses it too); anything else is a crash, never an answer.
    resp = e instanceof KeyError || e instanceof SyntaxError ? { err: `${e.name}: ${e.message}` } : { err: `CRASH ${e?.name}: ${e?.message}`, crash: true };
  }
  out.push(JSON.stringify(resp));
  if (out.length >= 256) process.stdout.write(out.splice(0).join("\n") + "\n");
}
if (out.length) process.stdout.write(out.join("\n") + "\n");
