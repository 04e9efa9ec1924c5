// The Runyard console: reads /console/api (live over server-sent events, read with fetch so
// that a bearer token can be sent), draws the views and the charts (inline SVG), and sends
// the operator's actions. Nothing is loaded from anywhere but this server.
"use strict";

const API = "console/api";
const COLORS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626", "#475569"];
let latest = null;
let chartBy = "by_instance";

function token() { return sessionStorage.getItem("runyard-console-token") || ""; }

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function short(id) { return id ? el("span", { class: "id", title: id }, id.length > 14 ? id.slice(0, 8) + "…" + id.slice(-4) : id) : "–"; }
function ago(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}
function when(iso) { return iso ? new Date(iso).toLocaleTimeString() : "–"; }
function until(iso, now) {
  if (!iso) return "–";
  const s = (new Date(iso) - new Date(now)) / 1000;
  return s >= 0 ? "in " + ago(s) : ago(-s) + " ago";
}

function fill(tbody, rows, empty, columns) {
  tbody.replaceChildren();
  if (!rows.length) {
    tbody.append(el("tr", {}, el("td", { class: "muted", colspan: String(columns) }, empty)));
    return;
  }
  for (const row of rows) tbody.append(row);
}

function setStatus(text, cls) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status " + (cls || "");
}

function showLogin(reason) {
  document.getElementById("views").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-reason").textContent = reason;
  setStatus("no credential", "down");
}

async function act(path, body) {
  const result = document.getElementById("action-result");
  const answer = await fetch(API + path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body || {}),
  });
  const data = await answer.json().catch(() => ({}));
  result.textContent = answer.ok
    ? `${data.action} ${data.target}: done (by ${data.by})`
    : `refused (${answer.status}): ${data.detail || answer.statusText}`;
  return answer.ok;
}

function cancelButtons(run) {
  return el("td", {},
    el("button", { "data-action": "interrupt", onclick: () => act(`/runs/${run.run_id}/cancel`, { action: "interrupt" }) }, "Interrupt"), " ",
    el("button", { "data-action": "rollback", onclick: () => { if (confirm("Roll back (delete) run " + run.run_id + "?")) act(`/runs/${run.run_id}/cancel`, { action: "rollback" }); } }, "Rollback"));
}

function renderFleet(s) {
  const rows = s.fleet.map((i) => {
    const state = !i.alive ? "dead" : i.draining ? "draining" : "alive";
    return el("tr", { "data-instance": i.instance_id, "data-state": state, class: state },
      el("td", {}, el("span", { class: "id" }, i.instance_id), i.serving ? el("span", { class: "muted" }, " (this one)") : null),
      el("td", {}, i.host), el("td", {}, i.version), el("td", {}, when(i.started_at)),
      el("td", {}, ago(i.heartbeat_age_seconds) + " ago"),
      el("td", {}, `${i.slots_used} / ${i.slots_free}`),
      el("td", {}, el("span", { class: "state " + state }, state), i.drain_requested_by && !i.draining ? el("span", { class: "muted" }, " drain asked") : null),
      el("td", {}, i.alive && !i.draining && !i.drain_requested_by
        ? el("button", { onclick: () => { if (confirm("Drain " + i.instance_id + "?")) act(`/instances/${encodeURIComponent(i.instance_id)}/drain`); } }, "Drain")
        : null));
  });
  fill(document.querySelector("#fleet tbody"), rows, "no instance recorded yet", 8);
}

function renderQueue(s) {
  const q = s.queue;
  document.getElementById("queue-summary").textContent =
    `${q.pending} pending` + (q.oldest_wait_seconds !== null ? `, oldest waiting ${ago(q.oldest_wait_seconds)}` : "");
  fill(document.getElementById("queue-groups"), q.groups.map((g) => el("tr", {},
    el("td", {}, g.fairness_group), el("td", {}, g.priority), el("td", {}, g.pending), el("td", {}, ago(g.oldest_wait_seconds)))), "nothing pending", 4);
  fill(document.getElementById("queue-held"), q.held_back.map((h) => el("tr", {},
    el("td", {}, short(h.run_id)), el("td", {}, short(h.thread_id)), el("td", {}, h.fairness_group),
    el("td", { class: "wrap" }, h.reason), el("td", {}, ago(h.wait_seconds)))), "nothing held back", 5);
}

function renderRunning(s) {
  fill(document.querySelector("#running tbody"), s.running.map((r) => el("tr", { "data-run": r.run_id },
    el("td", {}, short(r.run_id)), el("td", {}, short(r.thread_id)), el("td", {}, short(r.assistant_id)),
    el("td", { class: "id", "data-owner": r.owner || "" }, r.owner || "–"), el("td", {}, r.attempt),
    el("td", {}, until(r.lease_expires_at, s.generated_at)), el("td", {}, r.fairness_group),
    cancelButtons(r))), "no run is running", 8);
}

function renderFailures(s) {
  fill(document.querySelector("#failures tbody"), s.failures.map((r) => el("tr", { "data-run": r.run_id },
    el("td", {}, short(r.run_id)), el("td", {}, short(r.thread_id)), el("td", {}, r.status),
    el("td", { class: "id" }, r.last_owner || "–"), el("td", {}, when(r.ended_at)), el("td", { class: "wrap" }, r.error || ""))), "no recent failure", 6);
}

function renderCrons(s) {
  fill(document.querySelector("#crons tbody"), s.crons.map((c) => el("tr", {},
    el("td", {}, short(c.cron_id)), el("td", {}, el("code", {}, c.schedule), c.timezone ? " " + c.timezone : ""),
    el("td", {}, new Date(c.next_run_date).toLocaleString()), el("td", {}, short(c.assistant_id)), el("td", {}, short(c.thread_id)))), "no enabled cron", 5);
}

function renderWebhooks(s) {
  fill(document.querySelector("#webhooks tbody"), s.webhooks.map((d) => el("tr", { "data-delivery": d.delivery_id },
    el("td", {}, short(d.delivery_id)), el("td", {}, short(d.run_id)), el("td", { class: "wrap" }, d.url), el("td", {}, d.status),
    el("td", {}, d.attempts), el("td", { class: "wrap" }, d.last_answer || ""), el("td", {}, d.status === "pending" ? until(d.next_attempt_at, s.generated_at) : "–"),
    el("td", {}, d.status === "failed" ? el("button", { onclick: () => act(`/webhooks/${encodeURIComponent(d.delivery_id)}/retry`) }, "Retry") : null))), "no pending or failed delivery", 8);
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

function drawChart(box, lines, minutes) {
  const W = 600, H = 120, L = 34, B = 14, T = 6;
  const values = lines.flatMap((l) => l.values.filter((v) => v !== null));
  const top = Math.max(1, ...values);
  const x = (i) => L + (i * (W - L - 4)) / (minutes.length - 1);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  for (const v of [0, top / 2, top]) {
    chart.append(svg("line", { x1: L, x2: W - 4, y1: y(v), y2: y(v), stroke: "#e5e8ec" }));
    const label = svg("text", { x: 2, y: y(v) + 3 });
    label.textContent = top >= 10 || v === 0 ? Math.round(v) : v.toFixed(1);
    chart.append(label);
  }
  for (const i of [0, 30, minutes.length - 1]) {
    const label = svg("text", { x: Math.min(x(i) - 12, W - 40), y: H - 2 });
    label.textContent = new Date(minutes[i]).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    chart.append(label);
  }
  for (const line of lines) {
    let d = "";
    line.values.forEach((v, i) => { if (v !== null) d += `${d && line.values[i - 1] !== null ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`; });
    if (d) chart.append(svg("path", { d, fill: "none", stroke: line.color, "stroke-width": line.width || 1.5 }));
    // A minute on its own (no neighbour to join) is still seen.
    line.values.forEach((v, i) => {
      if (v !== null && (line.values[i - 1] ?? null) === null && (line.values[i + 1] ?? null) === null) {
        chart.append(svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 2, fill: line.color }));
      }
    });
  }
  box.replaceChildren(chart);
}

function renderCharts(s) {
  const c = s.charts;
  const series = c[chartBy];
  const colored = series.map((one, n) => ({ one, color: COLORS[n % COLORS.length] }));
  for (const box of document.querySelectorAll("[data-chart]")) {
    const key = box.dataset.chart;
    const lines = colored.map(({ one, color }) => ({ values: one[key], color }));
    if (series.length > 1) lines.unshift({ values: c.total[key], color: "#9aa3ad", width: 1 });
    drawChart(box, lines, c.minutes);
  }
  const legend = document.getElementById("legend");
  legend.replaceChildren(...colored.map(({ one, color }) => {
    const item = el("span", { class: "id", title: one.key }, one.key);
    item.style.color = color;
    return item;
  }));
  if (series.length > 1) { const all = el("span", {}, "all"); all.style.color = "#9aa3ad"; legend.prepend(all); }
}

function render(s) {
  latest = s;
  document.getElementById("login").hidden = true;
  document.getElementById("views").hidden = false;
  document.getElementById("serving").replaceChildren(el("span", { class: "muted" }, "served by "), el("span", { class: "id" }, s.serving_instance));
  renderFleet(s); renderQueue(s); renderRunning(s); renderFailures(s); renderCrons(s); renderWebhooks(s); renderCharts(s);
  setStatus("live · " + new Date(s.generated_at).toLocaleTimeString(), "live");
}

async function follow() {
  let answer;
  try {
    answer = await fetch(API + "/live", { headers: headers({ Accept: "text/event-stream" }), cache: "no-store" });
  } catch (err) {
    setStatus("reconnecting…", "down");
    return 2000;
  }
  if (answer.status === 401 || answer.status === 403) {
    const data = await answer.json().catch(() => ({}));
    showLogin(data.detail || "This console needs an operator credential.");
    return null;
  }
  if (!answer.ok) { setStatus(`error ${answer.status}, retrying…`, "down"); return 3000; }
  const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    let chunk;
    try { chunk = await reader.read(); } catch (err) { break; }
    if (chunk.done) break;
    buffer += chunk.value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) render(JSON.parse(data));
    }
  }
  setStatus("reconnecting…", "down");
  return 1000;
}

async function loop() {
  for (;;) {
    const wait = await follow();
    if (wait === null) return;
    await new Promise((r) => setTimeout(r, wait));
  }
}

async function search(term) {
  const answer = await fetch(`${API}/runs/search?q=${encodeURIComponent(term)}`, { headers: headers() });
  const body = document.getElementById("search-results");
  if (!answer.ok) { fill(body, [], `search refused (${answer.status})`, 9); return; }
  const data = await answer.json();
  fill(body, data.runs.map((r) => el("tr", { "data-run": r.run_id },
    el("td", {}, short(r.run_id)), el("td", {}, short(r.thread_id)), el("td", {}, short(r.assistant_id)), el("td", {}, r.status),
    el("td", { class: "id" }, r.last_owner || "–"), el("td", {}, r.attempt), el("td", {}, when(r.created_at)), el("td", { class: "wrap" }, r.error || ""),
    r.status === "pending" || r.status === "running" ? cancelButtons(r) : el("td", {}))), "no run has this id", 9);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("runyard-console-token", document.getElementById("token").value.trim());
    setStatus("connecting…");
    loop();
  });
  document.getElementById("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const term = document.getElementById("search-term").value.trim();
    if (term) search(term);
  });
  document.getElementById("chart-by").addEventListener("change", (event) => {
    chartBy = event.target.value;
    if (latest) renderCharts(latest);
  });
  loop();
});
