// Drives the @langchain/react chat page (examples/web, index.html) in headless Chromium and
// reports what it saw.
//
//   node session_page.mjs '{"pageUrl": ..., "apiUrl": ..., "chromium": ..., "screenshot": ...}'
//
// Prints one JSON line of observations for tests/browser/test_session_page.py to judge; a
// step that times out prints {"error": ...} instead, with a screenshot of the page then.
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
  const api = encodeURIComponent(options.apiUrl);
  const pageUrl = `${options.pageUrl}?apiUrl=${api}&transport=${options.transport ?? "sse"}`;
  await page.goto(pageUrl);
  await page.getByLabel("Message").waitFor();

  // 1. A reply streams in token by token, and a reload in the middle of it re-attaches.
  await send(page, "tell me a story");
  await waitForWords(page, 6, stepMs);
  report.storyThread = threadParam(page);
  report.beforeReload = await lastAi(page);
  report.beforeReloadReplies = await replies(page);
  const requestsBeforeReload = report.requests.length;
  await page.reload();
  await waitForReply(page, options.story, stepMs);
  report.afterReload = {
    replies: await replies(page),
    messages: await page.locator(".message").allTextContents(),
    requests: report.requests.slice(requestsBeforeReload),
    thread: threadParam(page),
  };
  await page.getByTestId("status").filter({ hasText: "idle" }).waitFor();

  // 2. A new conversation: a greeting, then an action. interrupt() shows the approval
  // request, Approve answers it (input.respond) and the run goes on to its end.
  await page.getByRole("button", { name: "+ New chat" }).click();
  await page.waitForFunction(() => !new URL(location.href).searchParams.has("thread"));
  await send(page, "hello");
  await waitForReply(page, options.greeting, stepMs);
  report.greeting = { replies: await replies(page) };
  report.firstThread = threadParam(page);
  await send(page, options.action);
  const box = page.getByTestId("interrupt");
  await box.waitFor();
  report.question = await box.locator(".question").textContent();
  await box.getByRole("button", { name: "Approve" }).click();
  await waitForReply(page, options.actionReply, stepMs);
  await page.getByTestId("status").filter({ hasText: "idle" }).waitFor();
  report.interruptGone = (await page.getByTestId("interrupt").count()) === 0;

  // 3. A second action in the same conversation, turned down with a reason; the screenshot
  // (for a person to look at) shows the history, the conversation and the pending request.
  await send(page, options.declined);
  await page.getByTestId("interrupt").filter({ hasText: options.declinedQuestion }).waitFor();
  await page.getByLabel("Reason").fill(options.reason);
  report.history = await history(page, [
    [report.firstThread, "hello"],
    [report.storyThread, "tell me a story"],
  ]);
  await page.screenshot({ path: options.screenshot });
  await page.getByRole("button", { name: "Reject" }).click();
  await waitForReply(page, options.declinedReply, stepMs);
  await page.getByTestId("status").filter({ hasText: "idle" }).waitFor();
  report.final = await page.locator(".message").allTextContents();

  // 4. The thread list reopens the story.
  await page.locator(`[data-thread-id="${report.storyThread}"] button`).click();
  await waitForReply(page, options.story, stepMs);
  report.reopened = await page.locator(".message").allTextContents();
});
