// What the two page drivers (chat_page.mjs, session_page.mjs) share: Chromium through
// playwright-core from examples/web's node_modules, and the steps of a chat.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "..", "examples", "web", "package.json"));
const { chromium } = require("playwright-core");

// In the page, before its own scripts: every distinct text of the newest AI message, so the
// test can see a reply arrive piece by piece.
function recordReplies() {
  window.__replies = [];
  const record = () => {
    const all = document.querySelectorAll('.message[data-role="ai"]');
    const text = all.length ? all[all.length - 1].textContent : null;
    const seen = window.__replies;
    if (text !== null && seen[seen.length - 1] !== text) seen.push(text);
  };
  new MutationObserver(record).observe(document, {
    subtree: true,
    childList: true,
    characterData: true,
  });
}

// Runs `scenario(page, report)` in a fresh headless Chromium and prints one JSON line: the
// report, or {"error": ...} with a screenshot of the page at that moment.
export async function drive(options, scenario) {
  const stepMs = options.stepTimeoutMs ?? 30000;
  const browser = await chromium.launch({
    executablePath: options.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
  const report = { requests: [], consoleErrors: [] };
  let page;
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
    await context.addInitScript(recordReplies);
    page = await context.newPage();
    page.setDefaultTimeout(stepMs);
    page.on("console", (msg) => msg.type() === "error" && report.consoleErrors.push(msg.text()));
    page.on("request", (request) => {
      if (!request.url().startsWith(options.apiUrl)) return;
      report.requests.push({
        method: request.method(),
        path: new URL(request.url()).pathname,
        lastEventId: request.headers()["last-event-id"] ?? null,
        body: request.postData(),
      });
    });
    await scenario(page, report, stepMs);
  } catch (error) {
    report.error = String(error?.stack ?? error);
    if (page) await page.screenshot({ path: options.screenshot }).catch(() => {});
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(report));
}

export const lastAi = (page) =>
  page.evaluate(() => {
    const all = document.querySelectorAll('.message[data-role="ai"]');
    return all.length ? all[all.length - 1].textContent : null;
  });

export const replies = (page) => page.evaluate(() => window.__replies);

export async function send(page, text) {
  await page.getByLabel("Message").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

export async function waitForReply(page, text, stepMs) {
  await page.waitForFunction(
    (expected) => {
      const all = document.querySelectorAll('.message[data-role="ai"]');
      return all.length > 0 && all[all.length - 1].textContent === expected;
    },
    text,
    { timeout: stepMs },
  );
}

// Waits until the newest AI message has at least `words` words.
export async function waitForWords(page, words, stepMs) {
  await page.waitForFunction(
    (n) => {
      const all = document.querySelectorAll('.message[data-role="ai"]');
      const text = all.length ? all[all.length - 1].textContent : "";
      return text.split(" ").length >= n;
    },
    words,
    { timeout: stepMs },
  );
}

export const threadParam = (page) => new URL(page.url()).searchParams.get("thread");

// The history list, top to bottom, once every (id, title) pair given is shown.
export async function history(page, titles) {
  for (const [id, title] of titles) {
    await page
      .locator(`[data-thread-id="${id}"] .thread-title`)
      .filter({ hasText: title })
      .waitFor();
  }
  return page.locator("[data-thread-id]").evaluateAll((items) =>
    items.map((li) => ({
      id: li.dataset.threadId,
      title: li.querySelector(".thread-title").textContent,
    })),
  );
}
