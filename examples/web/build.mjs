// Bundles the example page (app.ts and the client) with esbuild into
// dist/app.js, or into the directory given: `make ts`, then
//   node examples/web/build.mjs
// The client and esbuild come from clientsdk/typescript's node_modules.
import { fileURLToPath } from "node:url";
import { dirname, join, resolve } from "node:path";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const client = resolve(here, "../../clientsdk/typescript");
const esbuild = createRequire(join(client, "package.json"))("esbuild");
const outdir = process.argv[2] ? resolve(process.argv[2]) : join(here, "dist");

await esbuild.build({
  entryPoints: [join(here, "app.ts")],
  outfile: join(outdir, "app.js"),
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  sourcemap: false,
  alias: { "@oncejob/client": join(client, "src/index.ts") },
  nodePaths: [join(client, "node_modules")],
  logLevel: "warning",
});
console.log(`wrote ${join(outdir, "app.js")}`);
