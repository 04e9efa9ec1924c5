// The operator console (/console) against two `runyard serve` instances on PostgreSQL and
// Redis, in headless Chromium: the credential asked for, both instances shown, a run seen
// running and finishing without a reload, a cancel from the page, and a SIGKILLed instance
// shown dead while its run resumes on the other. Prints one JSON report (page_driver.mjs).
import { drive } from "./page_driver.mjs";

const options = JSON.parse(process.argv[2]);
const [first, second] = options.servers; // {url, pid}

async function api(base, path, body) {
  const answer = await fetch(base + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!answer.ok) throw new Error(`${path}: ${answer.status} ${await answer.text()}`);
  return answer.json();
}

async function startRun(seconds) {
  const thread = await api(first.url, "/threads", {});
  const run = await api(first.url, `/threads/${thread.thread_id}/runs`, {
    assistant_id: "slow",
    input: { seconds },
  });
  return run;
}

async function open(page, server, report) {
  await page.goto(server.url + "/console");
  // No credential yet: the page asks for one (the API answered 401).
  await page.waitForSelector("#login:not([hidden])");
  report.askedForToken = (await page.textContent("#login-reason")).trim();
  await page.fill("#token", options.token);
  await page.click("#login button");
  await page.waitForSelector("#views:not([hidden])");
}

const runRow = (id) => `#running tr[data-run="${id}"]`;

await drive({ ...options, apiUrl: first.url }, async (page, report, stepMs) => {
  report.outside = [];
  page.on("request", (request) => {
    const url = request.url();
    if (!options.servers.some((s) => url.startsWith(s.url)) && !url.startsWith("data:")) {
      report.outside.push(url);
    }
  });
  await open(page, first, report);

  // Both instances appear, alive.
  await page.waitForFunction(() => document.querySelectorAll('#fleet tr[data-state="alive"]').length === 2);
  report.fleet = await page.$$eval("#fleet tr[data-instance]", (rows) => rows.map((r) => r.dataset.instance));

  // A run appears, runs on one of them, and finishes, without a reload.
  const quick = await startRun(1.5);
  await page.waitForSelector(runRow(quick.run_id));
  report.quickOwner = await page.getAttribute(`${runRow(quick.run_id)} [data-owner]`, "data-owner");
  await page.waitForSelector(runRow(quick.run_id), { state: "detached" });
  report.quick = quick;

  // A cancel from the console interrupts a running run.
  const long = await startRun(30);
  await page.waitForSelector(runRow(long.run_id));
  await page.click(`${runRow(long.run_id)} button[data-action="interrupt"]`);
  await page.waitForSelector(runRow(long.run_id), { state: "detached" });
  await page.waitForFunction(() => /cancel_interrupt .*: done/.test(document.querySelector("#action-result").textContent));
  report.cancelled = long;

  // SIGKILL the instance that runs a run: shown dead, its run resumes on the other.
  const victim = await startRun(4);
  await page.waitForSelector(runRow(victim.run_id));
  const owner = await page.getAttribute(`${runRow(victim.run_id)} [data-owner]`, "data-owner");
  const doomed = options.servers.find((s) => owner.split(":")[1] === String(s.pid));
  const survivor = options.servers.find((s) => s !== doomed);
  if (doomed === first) {
    // Watch from the instance that lives on.
    await open(page, survivor, report);
  }
  process.kill(doomed.pid, "SIGKILL");
  report.killed = owner;
  await page.waitForSelector(`#fleet tr[data-instance="${owner}"][data-state="dead"]`, { timeout: stepMs });
  await page.waitForFunction(
    ([row, gone]) => {
      const cell = document.querySelector(row + " [data-owner]");
      return cell && cell.dataset.owner && cell.dataset.owner !== gone;
    },
    [runRow(victim.run_id), owner],
  );
  report.resumedOn = await page.getAttribute(`${runRow(victim.run_id)} [data-owner]`, "data-owner");
  await page.waitForTimeout(300);
  await page.screenshot({ path: options.screenshot, fullPage: true });
  await page.waitForSelector(runRow(victim.run_id), { state: "detached", timeout: stepMs });
  report.victim = victim;
  report.survivor = survivor.url;
});
