// Drives the legacy-hook chat page (examples/web, legacy.html) in headless Chromium and
// reports what it saw.
//
//   node chat_page.mjs '{"pageUrl": ..., "apiUrl": ..., "chromium": ..., "screenshot": ...}'
//
// Prints one JSON line of observations for tests/browser/test_chat_page.py to judge; a step
// that times out prints {"error": ...} instead, with a screenshot of the page at that moment.
import {
  drive,
  history,
  lastAi,
  replies,
  send,
  threadParam,
  waitForReply,
  waitForWords,
} from "./page_driver.mjs";

const options = JSON.parse(process.argv[2]);

await drive(options, async (page, report, stepMs) => {
  const pageUrl = `${options.pageUrl}?apiUrl=${encodeURIComponent(options.apiUrl)}`;
  await page.goto(pageUrl);
  await page.getByLabel("Message").waitFor();

  // 1. A reply streams in token by token.
  await send(page, "hello");
  await waitForReply(page, options.greeting, stepMs);
  report.greeting = { replies: await replies(page) };
  report.firstThread = threadParam(page);
  await page.locator(`[data-thread-id="${report.firstThread}"]`).waitFor();

  // 2. interrupt(): the approval request shows, Approve resumes the run to its end.
  await send(page, options.action);
  const box = page.getByTestId("interrupt");
  await box.waitFor();
  report.question = await box.locator(".question").textContent();
  await box.getByRole("button", { name: "Approve" }).click();
  await waitForReply(page, options.actionReply, stepMs);
  await page.getByTestId("status").filter({ hasText: "idle" }).waitFor();
  report.interruptGone = (await page.getByTestId("interrupt").count()) === 0;
  report.afterInterrupt = await page.locator(".message").allTextContents();

  // 3. A reload in the middle of a run resumes its stream.
  await page.getByRole("button", { name: "+ New chat" }).click();
  await page.waitForFunction(() => !new URL(location.href).searchParams.has("thread"));
  await send(page, "tell me a story");
  await waitForWords(page, 6, stepMs);
  report.storyThread = threadParam(page);
  report.beforeReload = await lastAi(page);
  const requestsBeforeReload = report.requests.length;
  await page.reload();
  await waitForReply(page, options.story, stepMs);
  report.afterReload = {
    replies: await replies(page),
    messages: await page.locator(".message").allTextContents(),
    requests: report.requests.slice(requestsBeforeReload),
    thread: threadParam(page),
  };

  // 4. The thread history lists both conversations; reopen the first one.
  // The list is read again when a run ends, so both are titled by now.
  report.history = await history(page, [
    [report.firstThread, "hello"],
    [report.storyThread, "tell me a story"],
  ]);
  await page.locator(`[data-thread-id="${report.firstThread}"] button`).click();
  await waitForReply(page, options.actionReply, stepMs);
  report.reopened = await page.locator(".message").allTextContents();

  // 5. For a person to look at: history, a conversation and a pending approval, which
  // Reject then turns down.
  await send(page, options.declined);
  await page.getByTestId("interrupt").waitFor();
  await page.screenshot({ path: options.screenshot });
  await page.getByRole("button", { name: "Reject" }).click();
  await waitForReply(page, options.declinedReply, stepMs);
  report.final = await page.locator(".message").allTextContents();
});
