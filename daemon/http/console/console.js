// paimond's console: the warehouse overview and one page per table, built from the daemon's
// JSON (/api/v1/tables, /api/v1/table?name=) and refreshed by polling. Text from the daemon is
// only ever set as textContent, never parsed as HTML.
"use strict";

const REFRESH_MS = Number(new URLSearchParams(location.search).get("refresh_ms")) || 3000;
const PAGE_SIZE = 100;
const view = { sort: "health", descending: false, page: 0, tables: {}, timer: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function size(bytes) {
  if (!bytes) return "0 B";
  const units = ["B", "KB", "MB", "GB", "TB"];
  const power = Math.min(units.length - 1, Math.floor(Math.log(bytes) / Math.log(1024)));
  return `${(bytes / 1024 ** power).toFixed(power ? 1 : 0)} ${units[power]}`;
}
function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "—";
}

// The conditions that make a table need attention, the worst first.
function reasons(name, t) {
  const f = t.figures || {};
  const out = [];
  if (t.error) out.push(`unreadable: ${t.error}`);
  if (t.quarantined) out.push(`quarantined after ${t.failures} failures`);
  const refused = t.refused || Object.entries(t.jobs || {})
    .filter(([, j]) => j.why && j.why.startsWith("refused")).map(([job]) => job);
  for (const job of refused) out.push(`${job} refused the table`);
  if (f.stop_trigger && f.max_sorted_runs >= f.stop_trigger) {
    out.push(`${f.max_sorted_runs} sorted runs: at the stop trigger (${f.stop_trigger}), writers stall`);
  } else if (f.compaction_trigger && f.max_sorted_runs > f.compaction_trigger) {
    out.push(`${f.max_sorted_runs} sorted runs, past the compaction trigger (${f.compaction_trigger})`);
  }
  if (f.postpone_rows > 0) out.push(`${f.postpone_rows} rows in postpone buckets, invisible to readers`);
  if (f.compaction_debt_bytes > 0) out.push(`compaction debt ${size(f.compaction_debt_bytes)}`);
  if (f.buckets_missing_vectors > 0) out.push(`${f.buckets_missing_vectors} buckets miss deletion vectors`);
  if (f.stale_index_files > 0) out.push(`${f.stale_index_files} files with stale indexes`);
  if (t.paused) out.push(t.paused);
  return out;
}

function healthOf(t) {
  const value = (t.figures || {}).health;
  return typeof value === "number" ? value : null;
}

function healthBadge(value) {
  const grade = value === null ? "unknown" : value >= 80 ? "good" : value >= 50 ? "fair" : "poor";
  return el("span", { class: `health ${grade}`, text: value === null ? "?" : Math.round(value) });
}

function sortKey(name, t) {
  const f = t.figures || {};
  switch (view.sort) {
    case "name": return name;
    case "state": return t.state;
    case "runs": return f.max_sorted_runs || 0;
    case "level0": return f.level0_files || 0;
    case "debt": return f.compaction_debt_bytes || 0;
    case "snapshots": return f.snapshots || 0;
    default: { const h = healthOf(t); return h === null ? -1 : h; }
  }
}

function visible() {
  const text = document.getElementById("filter-name").value.trim();
  const state = document.getElementById("filter-state").value;
  const rows = Object.entries(view.tables).filter(([name, t]) => {
    if (text && !name.startsWith(text)) return false;
    if (state === "attention") return reasons(name, t).length > 0;
    return !state || t.state === state;
  });
  rows.sort((a, b) => {
    const x = sortKey(...a), y = sortKey(...b);
    const order = x < y ? -1 : x > y ? 1 : a[0] < b[0] ? -1 : 1;
    return view.descending ? -order : order;
  });
  return rows;
}

function renderTotals(target, pairs) {
  target.replaceChildren(...pairs.map(([label, value]) =>
    el("div", {}, el("dt", { text: label }), el("dd", { text: String(value) }))));
}

function renderOverview() {
  const all = Object.entries(view.tables);
  const figure = (key) => all.reduce((sum, [, t]) => sum + ((t.figures || {})[key] || 0), 0);
  renderTotals(document.getElementById("totals"), [
    ["Tables", all.length],
    ["Need attention", all.filter(([n, t]) => reasons(n, t).length).length],
    ["Running", all.filter(([, t]) => t.running).length],
    ["Compaction debt", size(figure("compaction_debt_bytes"))],
    ["Level-0 files", figure("level0_files")],
    ["Snapshots", figure("snapshots")],
  ]);
  const rows = visible();
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  view.page = Math.min(view.page, pages - 1);
  const body = document.querySelector("#tables tbody");
  body.replaceChildren(...rows.slice(view.page * PAGE_SIZE, (view.page + 1) * PAGE_SIZE)
    .map(([name, t]) => {
      const f = t.figures || {};
      const why = reasons(name, t);
      return el("tr", { "data-table": name },
        el("td", {}, el("a", { href: `#table=${encodeURIComponent(name)}`, text: name })),
        el("td", {}, healthBadge(healthOf(t))),
        el("td", { class: "why", text: why[0] || "healthy" }),
        el("td", { class: "state", text: t.state }),
        el("td", { class: "num", text: `${f.max_sorted_runs ?? "?"} / ${f.stop_trigger ?? "?"}` }),
        el("td", { class: "num", text: f.level0_files ?? "?" }),
        el("td", { class: "num", text: size(f.compaction_debt_bytes) }),
        el("td", { class: "num", text: f.snapshots ?? "?" }));
    }));
  const nav = document.getElementById("pages");
  nav.replaceChildren(...(pages > 1 ? [...Array(pages).keys()].map((i) => {
    const button = el("button", { type: "button", text: String(i + 1) });
    if (i === view.page) button.setAttribute("aria-current", "page");
    button.addEventListener("click", () => { view.page = i; renderOverview(); });
    return button;
  }) : []));
}

function cellClass(runs, trigger, stop) {
  return stop && runs >= stop ? "stop" : trigger && runs > trigger ? "due" : "ok";
}

function renderTable(name, detail) {
  const table = detail.table, status = detail.status || {};
  document.getElementById("table-title").textContent = name;
  const why = reasons(name, status);
  document.getElementById("table-why").textContent = why.length ? why.join("; ") : "healthy";
  const f = status.figures || {};
  renderTotals(document.getElementById("table-figures"), [
    ["Health", healthOf(status) === null ? "?" : Math.round(healthOf(status))],
    ["State", status.state || "?"],
    ["Snapshots", `${table.snapshot_count} (${table.earliest_snapshot ?? "—"}…${table.latest_snapshot ?? "—"})`],
    ["Latest commit", table.latest_commit_kind || "—"],
    ["Tags", table.tags.length],
    ["Consumers", Object.keys(table.consumers).length],
    ["Level-0 files", f.level0_files ?? "?"],
    ["Triggers", `${table.compaction_trigger ?? "—"} / ${table.stop_trigger ?? "—"}`],
  ]);
  document.querySelector("#jobs tbody").replaceChildren(
    ...Object.entries(status.jobs || {}).map(([job, j]) => el("tr", { "data-job": job },
      el("th", { scope: "row", text: job }),
      el("td", { class: "outcome", text: j.outcome || "—" }),
      el("td", { text: when(j.last_run_at) }),
      el("td", { text: when(j.next_due_at) }),
      el("td", { text: j.why }),
      el("td", { text: j.detail || "" }))));
  document.querySelector("#buckets tbody").replaceChildren(...table.buckets.map((b) =>
    el("tr", { "data-bucket": `${b.partition}/${b.bucket}` },
      el("td", { text: b.partition || "(unpartitioned)" }),
      el("td", { class: "num", text: b.bucket }),
      el("td", {}, el("span", {
        class: `cell ${cellClass(b.sorted_runs, table.compaction_trigger, table.stop_trigger)}`,
        text: b.sorted_runs })),
      el("td", { text: b.levels.map((l) => `L${l.level}: ${l.files} (${size(l.size_bytes)})`).join(", ") }),
      el("td", { class: "num", text: size(b.size_bytes) }),
      el("td", { class: "num", text: b.levels.reduce((sum, l) => sum + l.rows, 0) }))));
  const notes = [];
  for (const [job, list] of Object.entries(table.refusals || {})) {
    for (const reason of list) notes.push(`${job} refuses: ${reason}`);
  }
  for (const key of table.undecided_options || []) notes.push(`option not decided: ${key}`);
  list("refusals", notes);
  const consumers = Object.entries(table.consumers || {});
  list("references", [
    `snapshots ${table.earliest_snapshot ?? "—"} to ${table.latest_snapshot ?? "—"} ` +
      `(${table.snapshot_count} retained)`,
    `tags: ${table.tags.length ? table.tags.join(", ") : "none"}`,
    `consumers: ${consumers.length ? consumers.map(([c, next]) => `${c} (next snapshot ${next})`).join(", ") : "none"}`,
    `branches: ${(detail.branches || []).length ? detail.branches.join(", ") : "none"}`,
  ]);
  const policy = status.policy || {}, sources = policy.sources || {};
  const settings = Object.entries(detail.options || {}).map(([k, v]) => `${k} = ${v} (table option)`);
  for (const [job, values] of Object.entries(policy.jobs || {})) {
    for (const [key, value] of Object.entries(values)) {
      const source = sources[`${job}.${key}`] || `[jobs.${job}] or its default`;
      settings.push(`${job}.${key} = ${JSON.stringify(value)} (${source})`);
    }
  }
  list("settings", settings);
}

function list(id, items) {
  document.getElementById(id).replaceChildren(
    ...(items.length ? items : ["none"]).map((text) => el("li", { text })));
}

function renderRuns(history) {
  const runs = (history.runs || []).slice(-20).reverse();
  document.querySelector("#runs tbody").replaceChildren(...runs.map((r) =>
    el("tr", { "data-run-job": r.job },
      el("td", { text: when(r.at) }),
      el("th", { scope: "row", text: r.job }),
      el("td", { class: "outcome", text: r.outcome }),
      el("td", { class: "num", text: r.duration_s.toFixed(2) }),
      el("td", { class: "num", text: r.read_bytes === undefined ? "—" : `${size(r.read_bytes)}, ${r.read_rows} rows` }),
      el("td", { class: "num", text: r.written_bytes === undefined ? "—" : `${size(r.written_bytes)}, ${r.written_rows} rows` }),
      el("td", { text: r.detail || "" }))));
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

// One small chart: points (x: seconds, y: value) scaled into a 100 x 40 box.
function chart(id, caption, points, format, marks = false) {
  const figure = el("figure", { class: "chart", "data-chart": id });
  const last = points.length ? format(points[points.length - 1].y) : "no data yet";
  figure.append(el("figcaption", { text: `${caption}: ${last}` }));
  const box = svg("svg", { viewBox: "0 0 100 40", preserveAspectRatio: "none", role: "img",
    "aria-label": `${caption}, ${points.length} points` });
  if (points.length) {
    const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
    const x0 = Math.min(...xs), dx = Math.max(...xs) - x0 || 1;
    const y1 = Math.max(...ys) || 1;
    const at = (p) => [2 + ((p.x - x0) / dx) * 96, 38 - (p.y / y1) * 36];
    if (marks) {
      for (const p of points) {
        const [x, y] = at(p);
        box.append(svg("circle", { cx: x, cy: y, r: 1.2, class: p.failed ? "failure" : "" }));
      }
    } else {
      box.append(svg("polyline", { points: points.map((p) => at(p).join(",")).join(" ") }));
    }
  }
  figure.append(box);
  return figure;
}

function renderHistory(history) {
  const figures = history.figures || [];
  const series = (key) => figures.filter((s) => key in s).map((s) => ({ x: s.at, y: s[key] }));
  const runs = (history.runs || []).map((r) => ({ x: r.at, y: r.duration_s,
    failed: r.outcome === "failure" }));
  document.getElementById("charts").replaceChildren(
    chart("level0_files", "Level-0 files", series("level0_files"), String),
    chart("max_sorted_runs", "Sorted runs (most in a bucket)", series("max_sorted_runs"), String),
    chart("compaction_debt_bytes", "Compaction debt", series("compaction_debt_bytes"), size),
    chart("snapshots", "Snapshots", series("snapshots"), String),
    chart("job_seconds", "Job durations (s)", runs, (v) => v.toFixed(2), true));
}

function authorization() {
  const token = document.getElementById("token").value;
  sessionStorage.setItem("paimond-token", token);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function getJson(url) {
  const response = await fetch(url, { cache: "no-store", headers: authorization() });
  if (response.status === 401 || response.status === 403) {
    throw new Error("the daemon asks for its token: enter it above");
  }
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

function current() {
  const match = location.hash.match(/^#table=(.+)$/);
  return match ? decodeURIComponent(match[1]) : null;
}

async function refresh() {
  const name = current();
  document.getElementById("overview").hidden = name !== null;
  document.getElementById("table-page").hidden = name === null;
  try {
    if (name === null) {
      view.tables = (await getJson("/api/v1/tables?view=summary")).tables;
      renderOverview();
    } else {
      const detail = await getJson(`/api/v1/table?name=${encodeURIComponent(name)}`);
      renderTable(name, detail);
      renderHistory(detail.history || {});
      renderRuns(detail.history || {});
    }
    document.getElementById("updated").textContent =
      `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    document.getElementById("updated").textContent = `not updated: ${error.message}`;
  }
}

async function act(action) {
  const result = document.getElementById("action-result");
  const response = await fetch(`/${action}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...authorization() },
    body: JSON.stringify({ table: current() }),
  });
  const body = await response.json().catch(() => ({}));
  result.textContent = response.ok ? `${action}: accepted` : `${action}: ${body.error || response.status}`;
  refresh();
}

function schedule() {
  clearInterval(view.timer);
  view.timer = setInterval(refresh, REFRESH_MS);
  refresh();
}

document.getElementById("token").value = sessionStorage.getItem("paimond-token") || "";
document.getElementById("token").addEventListener("change", refresh);
for (const button of document.querySelectorAll("th button[data-sort]")) {
  button.addEventListener("click", () => {
    view.descending = view.sort === button.dataset.sort ? !view.descending : false;
    view.sort = button.dataset.sort;
    renderOverview();
  });
}
for (const input of ["filter-name", "filter-state"]) {
  document.getElementById(input).addEventListener("input", () => { view.page = 0; renderOverview(); });
}
for (const button of document.querySelectorAll("button[data-action]")) {
  button.addEventListener("click", () => act(button.dataset.action));
}
window.addEventListener("hashchange", schedule);
schedule();
