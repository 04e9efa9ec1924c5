// Serves dist/ on its own origin: `npm run serve -- --port 5173` (default 5173, 127.0.0.1).
// `--api URL` also forwards GET /ui/... to the server: the generative UI's tags name their
// assets by path (as LangGraph's server answers them), so the page's origin must serve them.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { createServer } from "node:http";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "dist");
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] ? args[at + 1] : fallback;
};
const port = Number(option("port", process.env.PORT ?? "5173"));
const host = option("host", "127.0.0.1");
const api = option("api", null);
const types = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
};

const server = createServer(async (request, response) => {
  const path = new URL(request.url ?? "/", "http://page").pathname;
  if (api && path.startsWith("/ui/") && request.method === "GET") {
    const headers = {};
    if (request.headers["if-none-match"]) headers["if-none-match"] = request.headers["if-none-match"];
    const upstream = await fetch(new URL(request.url, api), { headers });
    const kept = ["content-type", "etag", "cache-control"];
    response.writeHead(
      upstream.status,
      Object.fromEntries(kept.filter((h) => upstream.headers.has(h)).map((h) => [h, upstream.headers.get(h)])),
    );
    response.end(Buffer.from(await upstream.arrayBuffer()));
    return;
  }
  const file = normalize(join(root, path === "/" ? "index.html" : path));
  if (!file.startsWith(root)) {
    response.writeHead(403).end("forbidden");
    return;
  }
  try {
    if (!(await stat(file)).isFile()) throw new Error("not a file");
  } catch {
    response.writeHead(404, { "content-type": "text/plain" }).end("not found; run npm run build");
    return;
  }
  response.writeHead(200, {
    "content-type": types[extname(file)] ?? "application/octet-stream",
    "cache-control": "no-store",
  });
  createReadStream(file).pipe(response);
});
server.listen(port, host, () => {
  console.log(`chat page on http://${host}:${port}/ (add ?apiUrl=... for another server)`);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => server.close(() => process.exit(0)));
