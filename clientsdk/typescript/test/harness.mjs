// The real server for the Node tests: `oncejob serve` (the binary `make
// build` makes, or $ONCEJOB_BIN), on the embedded store or on a fresh
// Postgres schema ($ONCEJOB_TEST_DATABASE_URL, default the local server),
// with three API keys and two pipelines, restartable on the same ports and
// data. Without the binary, psql or Postgres the tests SKIP with the
// install command, and FAIL under CI=true.
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const BIN = process.env.ONCEJOB_BIN ?? new URL("../../../bin/oncejob", import.meta.url).pathname;
export const DATABASE_URL = process.env.ONCEJOB_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test?sslmode=disable";

// API keys: acme's operator and submitter, and globex's.
export const KEYS = { acme: "acme-ts-key", acmeSubmitter: "acme-ts-submitter", globex: "globex-ts-key" };

const PIPELINES = `
pipelines:
  - name: quick
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
  - name: reviewed
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
    require_approval: true
`;

const sha = (s) => createHash("sha256").update(s).digest("hex");

/** missing says why the tests cannot run here, or "" when they can. */
export function missing(store) {
  if (!existsSync(BIN)) return `no server binary at ${BIN}: run make build (or set ONCEJOB_BIN)`;
  if (store === "postgres") {
    try {
      execFileSync("psql", [DATABASE_URL, "-Atqc", "select 1"], { stdio: "pipe" });
    } catch (e) {
      return `Postgres at ${DATABASE_URL} is not reachable with psql (${String(e.message).split("\n")[0]}): apt-get install -y postgresql-client, and start Postgres`;
    }
  }
  return "";
}

/** skipOrFail is node:test's skip option: a reason when the tests cannot run, which CI=true turns into a failure. */
export function skipOrFail(store) {
  const why = missing(store);
  if (why && process.env.CI === "true") throw new Error(`the TypeScript client's tests need this under CI=true: ${why}`);
  return why ? `SKIP: ${why}` : false;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/** Server is one oncejob serve process, and what it takes to start it again. */
export class Server {
  static async start(store, extraArgs = []) {
    const s = new Server();
    s.store = store;
    s.dir = mkdtempSync(join(tmpdir(), "oncejob-ts-"));
    writeFileSync(join(s.dir, "pipelines.yaml"), PIPELINES);
    writeFileSync(
      join(s.dir, "keys.yaml"),
      `keys:\n  - tenant: acme\n    sha256: ${sha(KEYS.acme)}\n  - tenant: acme\n    sha256: ${sha(KEYS.acmeSubmitter)}\n    role: submitter\n  - tenant: globex\n    sha256: ${sha(KEYS.globex)}\n`,
    );
    s.grpcAddr = `127.0.0.1:${await freePort()}`;
    s.httpAddr = `127.0.0.1:${await freePort()}`;
    s.baseUrl = `http://${s.httpAddr}`;
    s.args = [
      "serve", "--grpc-addr", s.grpcAddr, "--http-addr", s.httpAddr,
      "--api-keys", join(s.dir, "keys.yaml"), "--pipelines", join(s.dir, "pipelines.yaml"),
      "--poll-interval", "20ms", "--lease-duration", "5s", ...extraArgs,
    ];
    if (store === "postgres") {
      s.schema = "ts_" + randomBytes(6).toString("hex");
      execFileSync("psql", [DATABASE_URL, "-qc", `CREATE SCHEMA ${s.schema}`], { stdio: "pipe" });
      const sep = DATABASE_URL.includes("?") ? "&" : "?";
      s.args.push("--database-url", `${DATABASE_URL}${sep}search_path=${s.schema}&application_name=${s.schema}`, "--migrate");
    } else {
      s.args.push("--data-dir", join(s.dir, "data"));
    }
    await s.up();
    return s;
  }

  /** up starts the process and waits until it is ready. */
  async up() {
    this.log = "";
    this.proc = spawn(BIN, this.args, { stdio: ["ignore", "pipe", "pipe"] });
    this.proc.stdout.on("data", (d) => (this.log += d));
    this.proc.stderr.on("data", (d) => (this.log += d));
    this.exited = new Promise((resolve) => this.proc.on("exit", (code, signal) => resolve({ code, signal })));
    for (let i = 0; ; i++) {
      if (this.proc.exitCode !== null) throw new Error(`oncejob serve exited ${this.proc.exitCode}:\n${this.log}`);
      try {
        const r = await fetch(`${this.baseUrl}/readyz`);
        if (r.ok) return;
      } catch {
        // not listening yet
      }
      if (i > 600) throw new Error(`oncejob serve is not ready after 60s:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** down stops the process gracefully (SIGTERM): watches end with where to resume. */
  async down() {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill("SIGTERM");
    const { code, signal } = await this.exited;
    if (code !== 0) throw new Error(`oncejob serve exited ${code} (${signal}):\n${this.log}`);
  }

  async restart() {
    await this.down();
    await this.up();
  }

  async close() {
    try {
      await this.down();
    } finally {
      if (this.schema) execFileSync("psql", [DATABASE_URL, "-qc", `DROP SCHEMA ${this.schema} CASCADE`], { stdio: "pipe" });
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
