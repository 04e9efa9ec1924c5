// Drives the generative UI page (examples/web, genui.html) in headless Chromium: asks for the
// weather, waits for the `weather` component the graph pushed to render (in its shadow root,
// styled by the bundle's CSS), reloads the page and waits for it again. Prints the report.
import { drive, send } from "./page_driver.mjs";

const options = JSON.parse(process.argv[2]);

// What the rendered component shows: its text, its props as attributes, the bundle's style.
const readCard = (page) =>
  page.getByTestId("weather").evaluate((card) => ({
    text: card.textContent,
    city: card.dataset.city,
    border: getComputedStyle(card).borderTopColor,
    inShadowRoot: card.getRootNode() instanceof ShadowRoot,
    underMessage: card.getRootNode().host?.closest('.message[data-role="ai"]')?.textContent ?? null,
  }));

await drive(options, async (page, report) => {
  page.on("request", (request) => {
    const url = new URL(request.url());
    if (url.pathname.startsWith("/ui/")) report.uiRequests.push(`${request.method()} ${url.href}`);
  });
  report.uiRequests = [];
  const url = `${options.pageUrl}genui.html?apiUrl=${encodeURIComponent(options.apiUrl)}`;
  await page.goto(url);
  await send(page, options.ask);
  await page.getByTestId("weather").waitFor();
  report.first = await readCard(page);
  await page.getByTestId("status").getByText("idle").waitFor();
  report.url = page.url();
  await page.reload();
  await page.getByTestId("weather").waitFor();
  report.afterReload = await readCard(page);
  report.urlAfterReload = page.url();
});
