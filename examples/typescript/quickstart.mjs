// Submits a document to oncejob once, follows it through its stages and
// prints the summary, with the TypeScript client from Node (18 or later).
// Against `oncejob serve`, after `make ts` and `npm ci --prefix examples/typescript`:
//
//     node examples/typescript/quickstart.mjs
import { Client, JobStage, JobStatus } from "@oncejob/client";

// The HTTP address: the server speaks the Connect protocol and gRPC-web
// there, beside the JSON API. Dev mode (no --api-keys) needs no key.
const client = new Client({ baseUrl: process.env.ONCEJOB_HTTP ?? "http://127.0.0.1:7071", apiKey: process.env.ONCEJOB_API_KEY });

// No key given: submit derives the same key as the Go and Python SDKs
// would, so running this twice (or after their quick starts) is one job.
const res = await client.submit({
  pipeline: "summarize",
  document: { content: { case: "text", value: "Invoice 42: 3 licences, EUR 1,200, due 2026-12-31." } },
});
console.log(`job ${res.job.id} (replayed: ${res.replayed})`);
// Each event once, in order; a broken stream resumes after the last one.
for await (const e of client.watchJob(res.job.id)) {
  console.log(" ", JobStatus[e.status], JobStage[e.stage]);
}
const job = await client.get(res.job.id);
console.log("summary:", job.output?.summary);
