// The example page of docs/guide-typescript.md: submit a document with the
// TypeScript client and show its stages live (WatchJob over the Connect
// protocol or gRPC-web, from another origin than the API's). Everything the
// server sends is written with textContent: a document's markup is text.
import { Client, JobStage, JobStatus, OncejobError } from "@oncejob/client";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

// The form's fields may come from the query string (?api=...&key=...&protocol=...).
const params = new URLSearchParams(location.search);
for (const name of ["api", "key", "protocol", "pipeline"]) {
  const v = params.get(name);
  if (v !== null) $<HTMLInputElement>(name).value = v;
}

function show(id: string, text: string): void {
  $(id).textContent = text;
}

$<HTMLFormElement>("submit-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const button = $<HTMLButtonElement>("submit");
  button.disabled = true;
  $("error").hidden = true;
  $("events").replaceChildren();
  show("summary", "");
  try {
    const client = new Client({
      baseUrl: $<HTMLInputElement>("api").value,
      apiKey: $<HTMLInputElement>("key").value,
      protocol: $<HTMLSelectElement>("protocol").value as "connect" | "grpc-web",
    });
    const text = $<HTMLTextAreaElement>("document").value;
    // One key per intent (submitKey of the request): submitting the same
    // document again, or a retry after a lost answer, is the same job.
    const res = await client.submit({
      pipeline: $<HTMLInputElement>("pipeline").value,
      document: { name: "pasted.txt", content: { case: "text", value: text } },
    });
    $("job").hidden = false;
    show("job-id", res.job.id);
    $("replayed").hidden = !res.replayed;
    show("preview", text);
    setStatus(res.job.status);
    for await (const e of client.watchJob(res.job.id)) {
      const li = document.createElement("li");
      li.dataset.seq = String(e.seq);
      li.dataset.stage = JobStage[e.stage];
      li.textContent = `#${e.seq} ${JobStatus[e.status]} ${JobStage[e.stage]}${e.message ? " — " + e.message : ""}`;
      $("events").append(li);
      setStatus(e.status);
    }
    const job = await client.get(res.job.id);
    const summary = job.output?.summary;
    show("summary", typeof summary === "string" ? summary : JSON.stringify(job.output ?? null));
    setStatus(job.status);
  } catch (e) {
    $("error").hidden = false;
    show("error", e instanceof OncejobError ? `${e.codeName}${e.reason ? " " + e.reason : ""}: ${e.message}` : String(e));
  } finally {
    button.disabled = false;
  }
});

function setStatus(s: JobStatus): void {
  show("status", JobStatus[s]);
  $("status").dataset.status = JobStatus[s];
}
