// The shared key vectors (clientsdk/testdata): WorkID, SubmitKey and
// NormalizeURL give what the Go and Python SDKs give, and refuse what they
// refuse. The differential test (clientsdk/keys_ts_differential_ext_test.go)
// adds generated inputs.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { KeyError, canonicalJson, submitKey, workId } from "../dist/index.js";
import { normalizeUrl } from "../dist/url.js";

const testdata = new URL("../../testdata/", import.meta.url);
const read = (name) => JSON.parse(readFileSync(new URL(name, testdata), "utf8"));

test("workid vectors", () => {
  const v = read("workid_vectors.json");
  assert.ok(v.work_id.length > 20);
  for (const c of v.work_id) {
    let got;
    try {
      got = workId(c.kind, c.version, JSON.parse(c.payload), c.drop ?? []);
    } catch (e) {
      if (!(e instanceof KeyError) && !(e instanceof SyntaxError)) throw e;
      assert.ok(c.error, `${c.name}: refused (${e.message}) but Go gives ${c.work_id}`);
      continue;
    }
    assert.ok(!c.error, `${c.name}: Go refuses it, TypeScript gave ${got}`);
    assert.equal(got, c.work_id, c.name);
    if (c.canonical !== undefined && !(c.drop ?? []).length) assert.equal(canonicalJson(JSON.parse(c.payload)), c.canonical, c.name);
  }
});

test("submit key vectors", () => {
  const v = read("workid_vectors.json");
  assert.ok(v.submit_key.length > 0);
  for (const c of v.submit_key) {
    const content = c.data_base64 !== undefined
      ? { case: "data", value: new Uint8Array(Buffer.from(c.data_base64, "base64")) }
      : { case: "text", value: c.text };
    const got = submitKey({
      pipeline: c.pipeline,
      modelProfile: c.model_profile,
      params: JSON.parse(c.params),
      document: { name: c.document_name, mediaType: c.media_type, content },
    });
    assert.equal(got, c.key, c.name);
  }
});

test("normalizeurl vectors", () => {
  const v = read("normalizeurl_vectors.json");
  for (const c of v.normalize) {
    assert.equal(normalizeUrl(c.in), c.want, c.in);
    assert.equal(normalizeUrl(c.want), c.want, `idempotent: ${c.want}`);
  }
  for (const input of v.invalid) {
    assert.throws(() => normalizeUrl(input), KeyError, JSON.stringify(input));
  }
});

test("refusals are KeyErrors, never crashes", () => {
  let deep = 0;
  for (let i = 0; i < 10000; i++) deep = [deep];
  assert.throws(() => workId("k", 1, deep), KeyError);
  assert.throws(() => workId("k", 1, "x\ud800y"), KeyError);
  assert.throws(() => workId("k", 1, { "\udc00": 1 }), KeyError);
  assert.throws(() => workId("k", 1, Infinity), KeyError);
  assert.throws(() => workId("k", 1, new Date(0)), KeyError);
  assert.throws(() => workId("k", 1, undefined), KeyError);
  assert.throws(() => workId("a b", 1, 1), KeyError);
  assert.throws(() => workId("k", 0, 1), KeyError);
  assert.throws(() => workId("k", 1, {}, ["a"]), KeyError);
  assert.equal(workId("k", 1, 9007199254740993n), workId("k", 1, 2 ** 53));
  assert.equal(workId("k", 1, JSON.parse('{"__proto__": 1}')), workId("k", 1, JSON.parse('{"__proto__": 1.0}')));
  assert.equal(canonicalJson(JSON.parse('{"__proto__": {"a": 1}, "\\ue000": 1, "\\ud83d\\ude00": 2}')), '{"__proto__":{"a":1},"\ue000":1,"\ud83d\ude00":2}');
});
