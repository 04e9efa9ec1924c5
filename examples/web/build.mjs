// Bundles the two pages into dist/: `npm run build`.
//   index.html + main.js     the page on @langchain/react (the thread streaming session)
//   legacy.html + legacy.js  the page on the legacy hook, @langchain/langgraph-sdk/react
//   genui.html + genui.js    generative UI: the legacy hook and LoadExternalComponent
import { copyFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
await mkdir(dist, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.tsx"), join(here, "src", "legacy.tsx"), join(here, "src", "genui.tsx")],
  outdir: dist,
  bundle: true,
  format: "esm",
  minify: true,
  sourcemap: true,
  target: ["chrome110", "firefox110", "safari16"],
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
});
for (const file of ["index.html", "legacy.html", "genui.html", "style.css"]) {
  await copyFile(join(here, "src", file), join(dist, file));
}
console.log(`built ${dist}`);
