// Drives the example chat page (examples/web) in headless Chromium and reports what it saw.
//
//   node chat_page.mjs '{"pageUrl": ..., "apiUrl": ..., "chromium": ..., "screenshot": ...}'
//
// Prints one JSON line of observations for tests/browser/test_chat_page.py to judge; a step
// that times out prints {"error": ...} instead, with a screenshot of the page at that moment.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "..", "examples", "web", "package.json"));
const { chromium } = require("playwright-core");

const options = JSON.parse(process.argv[2]);
const STEP_MS = options.stepTimeoutMs ?? 30000;

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

const lastAi = (page) =>
  page.evaluate(() => {
    const all = document.querySelectorAll('.message[data-role="ai"]');
    return all.length ? all[all.length - 1].textContent : null;
  });

async function send(page, text) {
  await page.getByLabel("Message").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

async function waitForReply(page, text) {
  await page.waitForFunction(
    (expected) => {
      const all = document.querySelectorAll('.message[data-role="ai"]');
      return all.length > 0 && all[all.length - 1].textContent === expected;
    },
    text,
    { timeout: STEP_MS },
  );
}

const threadParam = (page) => new URL(page.url()).searchParams.get("thread");

async function main() {
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
    page.setDefaultTimeout(STEP_MS);
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
    const pageUrl = `${options.pageUrl}?apiUrl=${encodeURIComponent(options.apiUrl)}`;
    await page.goto(pageUrl);
    await page.getByLabel("Message").waitFor();

    // 1. A reply streams in token by token.
    await send(page, "hello");
    await waitForReply(page, options.greeting);
    report.greeting = { replies: await page.evaluate(() => window.__replies) };
    report.firstThread = threadParam(page);
    await page.locator(`[data-thread-id="${report.firstThread}"]`).waitFor();

    // 2. interrupt(): the question shows, an answer resumes the run to its end.
    await send(page, options.action);
    const box = page.getByTestId("interrupt");
    await box.waitFor();
    report.question = await box.locator(".question").textContent();
    await box.getByLabel("Your answer").fill("yes");
    await box.getByRole("button", { name: "Answer" }).click();
    await waitForReply(page, options.actionReply);
    await page.getByTestId("status").filter({ hasText: "idle" }).waitFor();
    report.interruptGone = (await page.getByTestId("interrupt").count()) === 0;
    report.afterInterrupt = await page.locator(".message").allTextContents();

    // 3. A reload in the middle of a run resumes its stream.
    await page.getByRole("button", { name: "+ New chat" }).click();
    await page.waitForFunction(() => !new URL(location.href).searchParams.has("thread"));
    await send(page, "tell me a story");
    await page.waitForFunction(
      () => {
        const all = document.querySelectorAll('.message[data-role="ai"]');
        const text = all.length ? all[all.length - 1].textContent : "";
        return text.split(" ").length >= 6;
      },
      null,
      { timeout: STEP_MS },
    );
    report.storyThread = threadParam(page);
    report.beforeReload = await lastAi(page);
    const requestsBeforeReload = report.requests.length;
    await page.reload();
    await waitForReply(page, options.story);
    report.afterReload = {
      replies: await page.evaluate(() => window.__replies),
      messages: await page.locator(".message").allTextContents(),
      requests: report.requests.slice(requestsBeforeReload),
      thread: threadParam(page),
    };

    // 4. The thread history lists both conversations; reopen the first one.
    // The list is read again when a run ends, so both are titled by now.
    const titles = [
      [report.firstThread, "hello"],
      [report.storyThread, "tell me a story"],
    ];
    for (const [id, title] of titles) {
      await page
        .locator(`[data-thread-id="${id}"] .thread-title`)
        .filter({ hasText: title })
        .waitFor();
    }
    report.history = await page
      .locator("[data-thread-id]")
      .evaluateAll((items) =>
        items.map((li) => ({
          id: li.dataset.threadId,
          title: li.querySelector(".thread-title").textContent,
        })),
      );
    await page.locator(`[data-thread-id="${report.firstThread}"] button`).click();
    await waitForReply(page, options.actionReply);
    report.reopened = await page.locator(".message").allTextContents();

    // 5. For a person to look at: history, a conversation and a pending question, which a
    // "no" then turns down.
    await send(page, options.declined);
    await page.getByTestId("interrupt").waitFor();
    await page.screenshot({ path: options.screenshot });
    await page.getByLabel("Your answer").fill("no");
    await page.getByRole("button", { name: "Answer" }).click();
    await waitForReply(page, options.declinedReply);
    report.final = await page.locator(".message").allTextContents();
  } catch (error) {
    report.error = String(error?.stack ?? error);
    if (page) await page.screenshot({ path: options.screenshot }).catch(() => {});
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(report));
}

await main();
