// Bundles the page into dist/ (index.html, main.js, style.css): `npm run build`.
import { copyFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
await mkdir(dist, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.tsx")],
  outfile: join(dist, "main.js"),
  bundle: true,
  format: "esm",
  minify: true,
  sourcemap: true,
  target: ["chrome110", "firefox110", "safari16"],
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
});
for (const file of ["index.html", "style.css"]) {
  await copyFile(join(here, "src", file), join(dist, file));
}
console.log(`built ${dist}`);
