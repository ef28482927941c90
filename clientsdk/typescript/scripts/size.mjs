// The client's size in a browser: what esbuild bundles, minified, for a
// page that uses the Client (with its keys, errors, retries and watches,
// the generated messages of the services it calls, Connect-ES and
// connect-web), and for one that also normalises URLs
// ("@oncejob/client/url", whose UTS #46 tables weigh the most); each
// gzipped (level 9). docs/performance.md reports it:
//   make ts && node clientsdk/typescript/scripts/size.mjs
import * as esbuild from "esbuild";
import { gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const entries = {
  "client (Client, workId, submitKey)": `import { Client, submitKey, workId } from "./src/index.ts"; globalThis.x = [Client, submitKey, workId];`,
  "client + normalizeUrl": `import { Client, submitKey, workId } from "./src/index.ts"; import { normalizeUrl } from "./src/url.ts"; globalThis.x = [Client, submitKey, workId, normalizeUrl];`,
};
for (const [name, contents] of Object.entries(entries)) {
  const out = await esbuild.build({
    stdin: { contents, resolveDir: root, loader: "ts" },
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    platform: "browser",
    write: false,
  });
  const js = out.outputFiles[0].contents;
  const gz = gzipSync(js, { level: 9 }).length;
  console.log(`${name}: ${(js.length / 1024).toFixed(1)} KiB minified, ${(gz / 1024).toFixed(1)} KiB minified+gzipped`);
}
