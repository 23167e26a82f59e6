/* tracehouse web UI: hand-written, no dependencies, no network beyond this server.
 *
 * One page; routes live in the hash (#/trace/NAME?start=..&end=..&producers=..), so a view
 * and its selection can be bookmarked and the static page is one public path. The selection
 * (time range and producers) is shared by every view of a trace: selecting in one filters
 * the others. Every chart is drawn from aggregates the server computes (it never sends raw
 * events beyond a small number), SVG for charts, canvas for the timeline.
 */
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const main = $("#main");

// ---------------------------------------------------------------- small helpers

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
const SVGNS = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const fmtInt = (n) => n === null || n === undefined ? "" : Number(n).toLocaleString("en-US");
function fmtNs(ns) {
  if (ns === null || ns === undefined) return "";
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e11 ? 0 : 3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 2) + " µs";
  return ns + " ns";
}
/** Labels of ticks `step` ns apart: the unit of the largest, as many decimals as tell them apart. */
function tickFormat(lo, hi, step) {
  const a = Math.max(Math.abs(lo), Math.abs(hi));
  const [div, unit] = a >= 1e9 ? [1e9, "s"] : a >= 1e6 ? [1e6, "ms"] : a >= 1e3 ? [1e3, "µs"] : [1, "ns"];
  const dec = Math.min(9, Math.max(0, Math.ceil(-Math.log10(Math.max(step, 1) / div) + 0.01)));
  return (ns) => (ns / div).toFixed(dec) + " " + unit;
}
/** An offset in ns, exact to the ns: "1.615012345 s". */
function fmtNsExact(ns) {
  if (ns === null || ns === undefined) return "";
  const neg = ns < 0, a = Math.abs(Math.round(ns)), sec = Math.floor(a / 1e9);
  return (neg ? "-" : "") + `${sec}.${String(a - sec * 1e9).padStart(9, "0")} s`;
}
/** Epoch ns (a string of digits: exact) as a UTC date and time. */
const fmtEpoch = (text) => new Date(Number(String(text).slice(0, -6) || 0)).toISOString().replace("T", " ").replace("Z", " UTC");
function fmtBytes(b) {
  if (b === null || b === undefined) return "";
  const u = ["B", "KB", "MB", "GB", "TB"]; let i = 0; let v = b;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
}
const fmtDate = (secs) => secs ? new Date(secs * 1000).toISOString().replace("T", " ").slice(0, 19) : "";
function color(key) {
  let x = 2166136261;
  for (const ch of String(key)) { x ^= ch.charCodeAt(0); x = Math.imul(x, 16777619); }
  return `hsl(${(x >>> 0) % 360}, 55%, ${52 + ((x >>> 9) % 16)}%)`;
}
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
  "#2f6690", "#d1495b", "#66a182", "#8d96a3", "#edae49", "#00798c"];
const pal = (i) => PALETTE[i % PALETTE.length];

// ---------------------------------------------------------------- the server

function token() { return sessionStorage.getItem("tracehouse-token") || ""; }

class Pending extends Error { constructor(doc) { super(doc.message); this.doc = doc; } }

// Requests under way: main's aria-busy says so (for screen readers; the browser tests wait on it).
let inflight = 0;
function busy(delta) { inflight += delta; main.setAttribute("aria-busy", String(inflight > 0)); }

async function api(path, params = {}, opts = {}) {
  busy(1);
  try { return await apiCall(path, params, opts); } finally { busy(-1); }
}

async function apiCall(path, params, opts) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === "") continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x)); else q.append(k, v);
  }
  const url = path + (q.toString() ? "?" + q : "");
  const headers = Object.assign({}, opts.headers || {});
  if (token()) headers["Authorization"] = "Token " + token();
  let res;
  try {
    res = await fetch(url, { method: opts.method || "GET", body: opts.body, headers });
  } catch (e) {
    throw new Error(`cannot reach the server (${e.message})`);
  }
  if (res.status === 401) { askToken(); throw new Error("unauthorized: enter the server's token"); }
  if (opts.raw && res.ok) return res;
  let doc;
  const text = await res.text();
  try { doc = JSON.parse(text); } catch { doc = { error: text || res.statusText }; }
  if (res.status === 202 && doc.pending) throw new Pending(doc);
  if (!res.ok) throw new Error(doc.error || doc.message || `HTTP ${res.status}`);
  return doc;
}

function showError(err) {
  const box = $("#error");
  box.replaceChildren(h("button", { onclick: () => { box.hidden = true; }, "aria-label": "dismiss" }, "×"), String(err.message || err));
  box.hidden = false;
}
function clearError() { $("#error").hidden = true; }

function askToken() {
  const d = $("#login");
  if (!d.open) d.showModal();
}
$("#loginform").addEventListener("submit", () => {
  sessionStorage.setItem("tracehouse-token", $("#token").value.trim());
  route();
});

/** Render `fn(data)` into `box` once `load()` answers; a pending build shows its progress and retries.
 *  A box no longer in the page (the reader went elsewhere meanwhile) gets nothing, not even an error:
 *  `fn` would read the new route's `current`, and an error would show on the page left to. */
async function fill(box, load, fn, tries = 0) {
  try {
    const data = await load();
    if (!box.isConnected) return;
    box.replaceChildren();
    fn(data);
  } catch (e) {
    if (!box.isConnected) return;
    if (e instanceof Pending) {
      const j = e.doc.job;
      box.replaceChildren(h("div", { class: "pending", role: "status" },
        `${e.doc.message}: step ${j.done_steps + 1} of ${j.steps} (${j.step || "queued"}), ${j.seconds} s so far…`));
      if (box.isConnected && tries < 2000) setTimeout(() => box.isConnected && fill(box, load, fn, tries + 1), 1500);
    } else {
      box.replaceChildren(h("div", { class: "pending", role: "alert" }, "error: " + e.message));
      showError(e);
    }
  }
}

// ---------------------------------------------------------------- routing and the linked selection

let current = { page: "", trace: null, sel: {} };

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const qs = new URLSearchParams(query || "");
  const sel = {};
  for (const k of ["start", "end"]) if (qs.get(k)) sel[k] = Number(qs.get(k));
  if (sel.start !== undefined && sel.end !== undefined && sel.end < sel.start) [sel.start, sel.end] = [sel.end, sel.start];  // a reversed range
  if (qs.get("producers")) sel.producers = qs.get("producers").split(",").map(Number);
  return { page: parts[0] || "traces", arg: parts[1] || null, sel, qs };
}

function hrefFor(page, arg, sel = current.sel) {
  const q = new URLSearchParams();
  if (sel.start !== undefined) q.set("start", Math.round(sel.start));
  if (sel.end !== undefined) q.set("end", Math.round(sel.end));
  if (sel.producers && sel.producers.length) q.set("producers", sel.producers.join(","));
  return "#/" + page + (arg !== null && arg !== undefined ? "/" + encodeURIComponent(arg) : "") + (q.toString() ? "?" + q : "");
}

/** Change the linked selection: every view of the trace follows. */
function setSel(sel, { replace = false } = {}) {
  const clean = {};
  if (sel.start !== undefined && sel.end !== undefined && sel.end > sel.start) { clean.start = Math.floor(sel.start); clean.end = Math.ceil(sel.end); }
  if (sel.producers && sel.producers.length) clean.producers = sel.producers;
  const url = hrefFor(current.page, current.arg, clean);
  if (replace) { history.replaceState(null, "", url); route(); } else location.hash = url;
}

/** The selection as request parameters. Times are ns from the trace's first event (rel=1) both
 *  ways: epoch ns exceed 2^53, past which the browser's numbers are not exact. */
function selParams() {
  const p = { trace: current.trace, rel: 1 };
  if (current.sel.start !== undefined) { p.start = current.sel.start; p.end = current.sel.end; }
  if (current.sel.producers) p.producers = current.sel.producers.join(",");
  return p;
}

const traceCache = new Map();
async function traceInfo(name, fresh = false) {
  if (fresh || !traceCache.has(name)) traceCache.set(name, await api("/api/ui/trace", { trace: name, rel: 1 }));
  return traceCache.get(name);
}

function renderSelection() {
  const box = $("#selection");
  box.replaceChildren();
  if (!current.trace) return;
  const sel = current.sel;
  if (sel.start !== undefined) {
    box.append(h("span", {}, `range ${fmtNs(sel.start)} – ${fmtNs(sel.end)} (${fmtNs(sel.end - sel.start)})`),
      h("button", { onclick: () => setSel({ producers: sel.producers }), title: "show the whole trace" }, "clear range"));
  }
  if (sel.producers) {
    const names = new Map((current.info ? current.info.producers : []).map((p) => [p.id, p.name]));
    const label = sel.producers.slice(0, 3).map((p) => names.get(p) || p).join(", ") + (sel.producers.length > 3 ? ` +${sel.producers.length - 3}` : "");
    box.append(h("span", {}, "producers " + label),
      h("button", { onclick: () => setSel({ start: sel.start, end: sel.end }), title: "all producers" }, "clear producers"));
  }
}

// Each navigation's number: a route still waiting for its trace's info when the reader moved on
// must not render over the page they moved to (it wiped the SQL console, then failed on `info`).
let routeGen = 0;
async function route() {
  const gen = ++routeGen;
  clearError();
  const { page, arg, sel, qs } = parseHash();
  const tracePages = ["trace", "timeline", "calls", "analyses", "debug", "waterfall"];
  current = { page, arg, sel, qs, trace: tracePages.includes(page) ? arg : null, info: null };
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === page));
  const tnav = $("#tracenav");
  tnav.hidden = !current.trace;
  if (current.trace) {
    tnav.replaceChildren(...[["trace", "Overview"], ["timeline", "Timeline"], ["calls", "Calls"], ["analyses", "Analyses"], ["debug", "Debug"]].map(([p, label]) =>
      h("a", { href: hrefFor(p, current.trace, sel), class: p === page ? "active" : null }, label)));
    let info;
    try { info = await traceInfo(current.trace); } catch (e) {
      if (gen === routeGen) { showError(e); main.replaceChildren(h("p", {}, e.message)); }
      return;
    }
    if (gen !== routeGen) return;  // navigated elsewhere meanwhile: that route renders
    current.info = info;
    if (info.trace.format === "otlp")  // OpenTelemetry traces: the Waterfall page (waterfall.js)
      tnav.append(h("a", { href: "#/waterfall/" + encodeURIComponent(current.trace), class: page === "waterfall" ? "active" : null }, "Waterfall"));
  }
  renderSelection();
  const pages = { traces: pageTraces, trace: pageOverview, timeline: pageTimeline, calls: pageCalls, analyses: pageAnalyses, sql: pageSql,
    results: pageResults, result: pageResult, ...(window.extraPages || {}) };
  main.replaceChildren();
  (pages[page] || pageTraces)();
  // a page may have kept the reader's place (the timeline's canvas after a key zoomed it)
  if (!main.contains(document.activeElement) || document.activeElement === document.body) main.focus({ preventScroll: true });
}
window.addEventListener("hashchange", route);

// ---------------------------------------------------------------- Traces

function pageTraces() {
  document.title = "Traces · tracehouse";
  const qs = current.qs;
  const form = h("form", { class: "search row", role: "search" },
    h("label", {}, "name, description or metadata", h("input", { name: "q", value: qs.get("q") || "", placeholder: "search" })),
    h("label", {}, "format", h("select", { name: "format" }, h("option", { value: "" }, "any"))),
    h("label", {}, "metadata KEY=GLOB", h("input", { name: "meta", value: qs.get("meta") || "", size: 14 })),
    h("label", {}, "overlaps from (ns)", h("input", { name: "start", value: qs.get("start") || "", size: 12, inputmode: "numeric" })),
    h("label", {}, "to (ns)", h("input", { name: "end", value: qs.get("end") || "", size: 12, inputmode: "numeric" })),
    h("label", {}, "events ≥", h("input", { name: "min_events", value: qs.get("min_events") || "", size: 8, inputmode: "numeric" })),
    h("label", {}, "events ≤", h("input", { name: "max_events", value: qs.get("max_events") || "", size: 8, inputmode: "numeric" })),
    h("label", {}, "bytes ≥", h("input", { name: "min_bytes", value: qs.get("min_bytes") || "", size: 8, inputmode: "numeric" })),
    h("label", {}, "bytes ≤", h("input", { name: "max_bytes", value: qs.get("max_bytes") || "", size: 8, inputmode: "numeric" })),
    h("button", { type: "submit", class: "primary" }, "Search"));
  const summary = h("p", { class: "muted", "aria-live": "polite" });
  const list = h("div", { class: "scroll" });
  main.append(h("h1", {}, "Traces"), form, summary, list, importForm(() => load()));
  let sort = qs.get("sort") || "name", desc = qs.get("desc") === "1";
  const params = () => {
    const p = Object.fromEntries(new FormData(form).entries());
    p.sort = sort; p.desc = desc ? "1" : "";
    return p;
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams(Object.entries(params()).filter(([, v]) => v));
    history.replaceState(null, "", "#/traces?" + q);
    load();
  });
  const cols = [["name", "name"], ["format", "format"], ["event_count", "events"], ["bytes", "size"], ["ts_min", "first event (UTC)"],
    ["ts_max", "duration"], ["created", "created"]];
  async function load() {
    try {
      const doc = await api("/api/ui/traces", params());
      const sel = form.elements.format;
      if (sel.options.length === 1) for (const f of doc.formats) sel.append(h("option", { value: f, selected: qs.get("format") === f }, f));
      summary.textContent = `${fmtInt(doc.total)} traces, ${fmtInt(doc.events)} events, ${fmtBytes(doc.bytes)}`;
      const head = h("tr", {}, cols.map(([key, label]) => h("th", { class: ["event_count", "bytes"].includes(key) ? "num" : null,
        "aria-sort": sort === key ? (desc ? "descending" : "ascending") : null },
      h("button", { class: "sort", onclick: () => { desc = sort === key ? !desc : key !== "name" && key !== "format"; sort = key; load(); } },
        label + (sort === key ? (desc ? " ▼" : " ▲") : "")))));
      const rows = doc.traces.map((t) => h("tr", {},
        h("td", {}, h("a", { href: "#/trace/" + encodeURIComponent(t.name) }, t.name), t.derived ? h("span", { class: "muted" }, " (processed)") : null,
          t.description ? h("div", { class: "muted" }, t.description) : null),
        h("td", {}, t.format), h("td", { class: "num" }, fmtInt(t.event_count)), h("td", { class: "num" }, fmtBytes(t.bytes)),
        h("td", { class: "num", title: t.ts_min === null ? null : `${t.ts_min_text || t.ts_min} ns` }, t.ts_min === null ? "" : fmtEpoch(t.ts_min_text || String(t.ts_min))),
        h("td", { class: "num" }, t.ts_min === null ? "" : fmtNs(t.ts_max - t.ts_min)), h("td", {}, fmtDate(t.created))));
      list.replaceChildren(h("table", { "aria-label": "traces" }, h("thead", {}, head), h("tbody", {}, rows)));
    } catch (e) { showError(e); }
  }
  load();
}

/** The upload form; `done()` once a trace is imported (the list shows it). */
function importForm(done = () => {}) {
  const fmt = h("select", { name: "format" }, h("option", { value: "" }, "recognise from the file"));
  api("/api/ui/info").then((info) => info.importers.forEach((i) => fmt.append(h("option", { value: i.name, title: i.description }, i.name)))).catch(showError);
  const status = h("p", { "aria-live": "polite" });
  const form = h("form", { class: "panel" },
    h("h2", {}, "Import a trace"),
    h("div", { class: "row" },
      h("label", {}, "file", h("input", { type: "file", name: "file", required: true })),
      h("label", {}, "format", fmt),
      h("label", {}, "trace name (default: the file's)", h("input", { name: "name", size: 18 })),
      h("label", {}, "importer options, one KEY=VALUE a line", h("textarea", { name: "opts", rows: 2, cols: 40,
        placeholder: "pattern=job_start:job_start {ts} {tid} {task:hex}" })),
      h("button", { type: "submit", class: "primary" }, "Import")),
    status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const file = form.elements.file.files[0];
    if (!file) return;
    const params = { filename: file.name, format: fmt.value, name: form.elements.name.value,
      opt: form.elements.opts.value.split("\n").map((x) => x.trim()).filter(Boolean) };
    status.textContent = `uploading ${file.name} (${fmtBytes(file.size)})…`;
    try {
      let { job } = await api("/api/ui/import", params, { method: "POST", body: file });
      while (job.state === "queued" || job.state === "running") {
        status.textContent = `${job.step || "queued"}… ${job.seconds} s`;
        await new Promise((r) => setTimeout(r, 700));
        job = await api("/api/ui/jobs", { id: job.id });
      }
      if (job.state === "failed") throw new Error(`import failed: ${job.error}`);
      const r = job.result || {};
      status.replaceChildren(`imported ${fmtInt(r.events)} events into `, h("a", { href: "#/trace/" + encodeURIComponent(job.trace) }, job.trace),
        r.rejected ? ` (${fmtInt(r.rejected)} lines rejected)` : "");
      traceCache.delete(job.trace);
      done();
    } catch (err) { status.textContent = err.message; showError(err); }
  });
  return form;
}

// ---------------------------------------------------------------- Overview

function pageOverview() {
  const info = current.info, t = info.trace;
  document.title = `${t.name} · tracehouse`;
  const own = [["format", t.format], ["description", t.description], ["events", fmtInt(t.event_count)], ["size on disk", fmtBytes(t.bytes)],
    ["first event", t.ts_min_text === null ? "" : `${fmtEpoch(t.ts_min_text)} (${t.ts_min_text} ns)`], ["duration", t.ts_min === null ? "" : fmtNs(t.ts_max - t.ts_min)],
    ["producers", fmtInt(info.producer_count)], ["created", fmtDate(t.created)],
    ["spans", info.spans ? `${info.spans.begin}${info.spans.end ? " / " + info.spans.end : ""}${info.spans.name ? " named by " + info.spans.name : ""}` : info.spans_why]];
  // the trace's metadata after them; a key named like one of ours (a generator's "events") says so
  const taken = new Set(own.map(([k]) => k));
  const meta = h("dl", { class: "meta" },
    ...[...own, ...Object.entries(t.metadata || {}).map(([k, v]) => [taken.has(k) ? `${k} (metadata)` : k, v])]
      .filter(([, v]) => v !== "" && v !== null && v !== undefined).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
  const types = h("table", { "aria-label": "event types" }, h("thead", {}, h("tr", {}, h("th", {}, "event type"), h("th", {}, "kind"), h("th", {}, "columns"))),
    h("tbody", {}, info.event_types.map((et) => h("tr", {}, h("td", {}, et.name), h("td", {}, et.kind),
      h("td", { class: "muted" }, et.params.map((c) => `${c.name} ${c.type}`).join(", "))))));
  const densityBox = h("div", { class: "chart-box" });
  const statsBox = h("div", { class: "grid" });
  const histBox = h("div");
  const topBox = h("div");
  main.append(h("h1", {}, t.name), h("div", { class: "grid" }, h("div", { class: "panel" }, meta), h("div", { class: "panel scroll" }, types)),
    h("h2", {}, "Event density"), h("p", { class: "muted" }, "Drag over the chart to select a time range (every view follows); keys on the chart: ",
      h("span", { class: "kbd" }, "+"), " ", h("span", { class: "kbd" }, "−"), " zoom, ", h("span", { class: "kbd" }, "←"), " ",
      h("span", { class: "kbd" }, "→"), " pan, ", h("span", { class: "kbd" }, "Esc"), " whole trace."),
    densityBox, h("h2", {}, "Statistics"), statsBox, h("h2", {}, "Span durations"), histBox, h("h2", {}, "Longest spans"), topBox);
  const p = selParams();
  fill(densityBox, () => api("/api/ui/density", Object.assign({ bins: 1000 }, p)),
    (d) => densityChart(densityBox, d));
  for (const [by, title] of [["type", "by event type"], ["producer", "by producer"], ["state", "by state (span name), self time"], ["link", "by link duration"]]) {
    const box = h("div", { class: "panel", "data-stats": by });
    statsBox.append(box);
    fill(box, () => api("/api/ui/stats", Object.assign({ by }, p)), (d) => statsPanel(box, title, by, d));
  }
  histPanel(histBox, p);
  fill(topBox, () => api("/api/ui/top", Object.assign({ n: 25 }, p)), (d) => spanTable(topBox, d.rows, d.why));
}

function densityChart(box, d) {
  if (!d.series.length) { box.append(h("p", { class: "muted" }, "no events")); return; }
  const W = 1000, H = 180, n = d.bins;
  const max = Math.max(1, ...d.total);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H + 18}`, role: "img", "aria-label": `events per bin over ${fmtNs(d.end - d.start)}, ${n} bins` });
  const acc = new Float64Array(n);
  const x = (i) => (i / n) * W;
  d.series.forEach((ser, si) => {
    let top = "", bottom = "";
    for (let i = 0; i < n; i++) {
      const y0 = H - (acc[i] / max) * H; acc[i] += ser.counts[i]; const y1 = H - (acc[i] / max) * H;
      top += `${i ? "L" : "M"}${x(i).toFixed(1)},${y1.toFixed(1)}L${x(i + 1).toFixed(1)},${y1.toFixed(1)}`;
      bottom = `L${x(i + 1).toFixed(1)},${y0.toFixed(1)}L${x(i).toFixed(1)},${y0.toFixed(1)}` + bottom;
    }
    svg.append(s("path", { d: top + bottom + "Z", fill: pal(si), "data-type": ser.type }, s("title", {}, ser.type)));
  });
  const tick = tickFormat(d.start, d.end, (d.end - d.start) / 4);
  for (let k = 0; k <= 4; k++) {
    const t = d.start + (d.end - d.start) * k / 4;
    svg.append(s("text", { x: k === 4 ? W - 2 : k * W / 4 + 2, y: H + 14, "font-size": 11, "text-anchor": k === 4 ? "end" : "start", fill: "#556", class: "axis" }, tick(t)));
  }
  svg.append(s("text", { x: 4, y: 12, "font-size": 11, fill: "#556" }, `max ${fmtInt(max)} events/bin`));
  const brush = s("rect", { y: 0, height: H, fill: "rgba(31,111,235,.18)", visibility: "hidden", class: "brush" });
  svg.append(brush);
  const chart = h("div", { class: "chart density", tabindex: 0, role: "group",
    "aria-label": "event density chart: drag or use + − ← → Esc", "data-start": d.start, "data-end": d.end });
  chart.append(svg);
  const toT = (px) => d.start + (d.end - d.start) * Math.min(1, Math.max(0, px));
  let from = null;
  const frac = (ev) => (ev.clientX - svg.getBoundingClientRect().left) / svg.getBoundingClientRect().width;
  svg.addEventListener("mousedown", (ev) => { from = frac(ev); brush.setAttribute("visibility", "visible"); brush.setAttribute("x", from * W); brush.setAttribute("width", 0); ev.preventDefault(); });
  window.addEventListener("mousemove", (ev) => {
    if (from === null) return;
    const f = Math.min(1, Math.max(0, frac(ev)));
    brush.setAttribute("x", Math.min(from, f) * W); brush.setAttribute("width", Math.abs(f - from) * W);
  });
  window.addEventListener("mouseup", (ev) => {
    if (from === null) return;
    const f = Math.min(1, Math.max(0, frac(ev))), a = Math.min(from, f), b = Math.max(from, f);
    from = null;
    if (b - a < 0.003) { brush.setAttribute("visibility", "hidden"); return; }
    setSel({ start: toT(a), end: toT(b), producers: current.sel.producers });
  });
  chart.addEventListener("keydown", (ev) => keyZoom(ev, d.start, d.end));
  chart.addEventListener("dblclick", () => setSel({ producers: current.sel.producers }));
  box.append(chart, h("div", { class: "legend" }, d.series.map((ser, i) => h("span", { style: `--c:${pal(i)}` }, ser.type))));
}

/** + − ← → Esc (and W S A D) on a chart: zoom and pan the linked range. */
function keyZoom(ev, start, end) {
  const span = end - start, mid = (start + end) / 2;
  const k = ev.key;
  let next = null;
  if (k === "+" || k === "=" || k === "w" || k === "W") next = [mid - span / 4, mid + span / 4];
  else if (k === "-" || k === "_" || k === "s" || k === "S") next = [mid - span, mid + span];
  else if (k === "ArrowLeft" || k === "a" || k === "A") next = [start - span / 4, end - span / 4];
  else if (k === "ArrowRight" || k === "d" || k === "D") next = [start + span / 4, end + span / 4];
  else if (k === "Escape" || k === "0") { ev.preventDefault(); setSel({ producers: current.sel.producers }); return; }
  if (!next) return;
  ev.preventDefault();
  const t = current.info.trace;
  const lo = t.ts_min, hi = t.ts_max + 1;
  let [a, b] = next;
  if (b - a >= hi - lo) { setSel({ producers: current.sel.producers }); return; }
  if (a < lo) { b += lo - a; a = lo; }
  if (b > hi) { a -= b - hi; b = hi; }
  setSel({ start: Math.max(a, lo), end: Math.max(b, a + 1), producers: current.sel.producers });
}

function statsPanel(box, title, by, d) {
  const tabs = h("div", { class: "tabs", role: "group", "aria-label": "chart kind" });
  const area = h("div");
  box.append(h("h3", {}, title), tabs, area);
  if (!d.rows.length) { area.append(h("p", { class: "muted" }, d.why || "nothing in this selection")); return; }
  const value = d.measure || (by === "type" || by === "producer" ? "events" : "total_dur");
  const fmt = value === "events" ? fmtInt : fmtNs;
  const total = d.rows.reduce((a, r) => a + (r[value] || 0), 0) || 1;
  const clickable = by === "producer";
  const pick = (r) => { if (clickable && r.key !== null) setSel({ start: current.sel.start, end: current.sel.end, producers: [r.key] }); };
  const draw = (kind) => {
    tabs.querySelectorAll("button").forEach((b) => b.setAttribute("aria-pressed", b.dataset.kind === kind));
    area.replaceChildren(kind === "pie" ? pie(d.rows, value, total, fmt, pick) : bars(d.rows, value, fmt, pick));
    const legend = h("div", { class: "legend" }, d.rows.map((r, i) => clickable && r.key !== null
      ? h("button", { onclick: () => pick(r), title: "show only this producer" }, h("span", { style: `--c:${pal(i)}` }, `${r.label}: ${fmt(r[value])}`))
      : h("span", { style: `--c:${pal(i)}` }, `${r.label}: ${fmt(r[value])}`)));
    area.append(legend);
  };
  for (const k of ["pie", "bar"]) tabs.append(h("button", { "data-kind": k, onclick: () => draw(k) }, k));
  area.dataset.total = d.total;
  draw("pie");
  if (d.table) {
    // every state (the first 200), beside the pie's top slices
    box.append(h("details", { class: "scroll", open: d.groups > d.rows.length ? "" : null }, h("summary", {}, `table of ${fmtInt(d.groups)} states`),
      h("table", { "aria-label": "states" }, h("thead", {}, h("tr", {}, ["state", "spans", "self", "total", "mean"].map((c, i) => h("th", { class: i ? "num" : null }, c)))),
        h("tbody", {}, d.table.map((r) => h("tr", {}, h("td", {}, r.label), h("td", { class: "num" }, fmtInt(r.spans)), h("td", { class: "num" }, fmtNs(r.self_dur)),
          h("td", { class: "num" }, fmtNs(r.total_dur)), h("td", { class: "num" }, fmtNs(r.mean_dur))))))));
  }
}

function pie(rows, value, total, fmt, pick) {
  const R = 80, svg = s("svg", { viewBox: "-90 -90 180 180", width: 180, height: 180, role: "img", "aria-label": "pie chart" });
  let a0 = -Math.PI / 2;
  rows.forEach((r, i) => {
    const share = (r[value] || 0) / total, a1 = a0 + share * 2 * Math.PI;
    const large = a1 - a0 > Math.PI ? 1 : 0;
    const path = share >= 0.9999 ? s("circle", { r: R, fill: pal(i) })
      : s("path", { d: `M0,0L${R * Math.cos(a0)},${R * Math.sin(a0)}A${R},${R} 0 ${large} 1 ${R * Math.cos(a1)},${R * Math.sin(a1)}Z`, fill: pal(i) });
    path.append(s("title", {}, `${r.label}: ${fmt(r[value])} (${(share * 100).toFixed(1)}%)`));
    path.addEventListener("click", () => pick(r));
    svg.append(path);
    a0 = a1;
  });
  return svg;
}

function bars(rows, value, fmt, pick) {
  const W = 420, rowH = 18, max = Math.max(1, ...rows.map((r) => r[value] || 0));
  const svg = s("svg", { viewBox: `0 0 ${W} ${rows.length * rowH}`, role: "img", "aria-label": "bar chart" });
  rows.forEach((r, i) => {
    const w = ((r[value] || 0) / max) * (W - 150);
    const g = s("g", { transform: `translate(0,${i * rowH})` },
      s("text", { x: 0, y: 13, "font-size": 11 }, String(r.label).slice(0, 22)),
      s("rect", { x: 140, y: 3, width: Math.max(1, w), height: rowH - 6, fill: pal(i) }, s("title", {}, `${r.label}: ${fmt(r[value])}`)),
      s("text", { x: 144 + w, y: 13, "font-size": 10, fill: "#445" }, fmt(r[value])));
    g.addEventListener("click", () => pick(r));
    svg.append(g);
  });
  return svg;
}

function histPanel(box, p) {
  const ctl = h("div", { class: "row" });
  const kind = h("select", { "aria-label": "histogram kind" }, h("option", { value: "hist" }, "log2 (bpftrace hist)"), h("option", { value: "lhist" }, "linear (bpftrace lhist)"));
  const unit = h("select", { "aria-label": "unit" }, ["ns", "us", "ms", "s"].map((u) => h("option", { value: u, selected: u === "us" }, u)));
  const area = h("div");
  ctl.append(h("label", {}, "buckets", kind), h("label", {}, "unit", unit));
  box.append(ctl, area);
  const load = () => fill(area, () => api("/api/ui/hist", Object.assign({ kind: kind.value, unit: unit.value }, p)), (d) => histChart(area, d));
  kind.addEventListener("change", load); unit.addEventListener("change", load);
  load();
}

function histChart(box, d) {
  if (!d.buckets.length) { box.append(h("p", { class: "muted" }, d.why || "no closed spans in this selection")); return; }
  const W = 900, rowH = 16, max = Math.max(...d.buckets.map((b) => b.count));
  const svg = s("svg", { viewBox: `0 0 ${W} ${d.buckets.length * rowH}`, role: "img", "aria-label": `${d.kind} of ${d.spans} span durations in ${d.unit}` });
  d.buckets.forEach((b, i) => {
    const w = (b.count / max) * (W - 240);
    svg.append(s("g", { transform: `translate(0,${i * rowH})` },
      s("text", { x: 0, y: 12, "font-size": 11, "font-family": "monospace" }, b.label),
      s("rect", { x: 150, y: 2, width: Math.max(b.count ? 1 : 0, w), height: rowH - 4, class: "bar" }, s("title", {}, `${b.label} ${d.unit}: ${fmtInt(b.count)}`)),
      s("text", { x: 154 + w, y: 12, "font-size": 10 }, fmtInt(b.count))));
  });
  const sm = Object.values(d.summary || {})[0] || {};
  box.append(h("p", { class: "muted" }, `${fmtInt(d.spans)} spans, ${d.unit}; ` +
    (sm.count ? `mean ${fmtNs(sm.mean)}, p50 ${fmtNs(sm.p50)}, p90 ${fmtNs(sm.p90)}, p99 ${fmtNs(sm.p99)}, max ${fmtNs(sm.max)}` : "")), svg);
}

function spanTable(box, rows, why) {
  if (!rows || !rows.length) { box.append(h("p", { class: "muted" }, why || "no spans in this selection")); return; }
  box.append(h("table", { "aria-label": "spans" }, h("thead", {}, h("tr", {}, ["span", "name", "producer", "start", "duration", "self", "depth"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {},
      h("td", {}, h("a", { href: spanHref(r), title: "show on the timeline" }, String(r.span_id))), h("td", {}, r.name),
      h("td", {}, r.producer_name), h("td", { class: "num" }, fmtNs(r.ts)), h("td", { class: "num" }, fmtNs(r.dur)),
      h("td", { class: "num" }, fmtNs(r.self_time)), h("td", { class: "num" }, r.depth))))));
}
const spanHref = (r) => hrefFor("timeline", current.trace, { start: r.ts - Math.max(r.dur, 1000) * 0.25, end: r.end_ts + Math.max(r.dur, 1000) * 0.25, producers: [r.producer] });

// ---------------------------------------------------------------- Timeline

function producerTree(info) {
  const kids = new Map(), byId = new Map();
  for (const p of info.producers) { byId.set(p.id, p); }
  const roots = [];
  for (const p of info.producers) {
    if (p.parent !== null && byId.has(p.parent)) { if (!kids.has(p.parent)) kids.set(p.parent, []); kids.get(p.parent).push(p.id); } else roots.push(p.id);
  }
  return { kids, byId, roots };
}

const tlState = { expanded: new Map(), page: 0, fields: new Map(), search: null, held: [], refocus: false };

/** Whether a timeline answer is exact at any zoom inside its range: every span and instant one
 *  by one (no per-pixel bins, no level cut for the budget, no counter lines). */
function exactTimeline(d) {
  return !(d.lines && d.lines.length) && d.rows.every((r) => r.levels.every((lv) => lv.mode === "items") && r.ticks.every((t) => t.mode === "items"));
}

/** The held answer (same trace, rows and fields) to draw [start, end) with at once: one that
 *  suffices (`enough`: it covers the range and is exact, or has bins as fine as a pixel here),
 *  else the one covering most of it, finest first. */
function heldTimeline(key, start, end, W) {
  let best = null;
  for (const h2 of tlState.held) {
    if (h2.key !== key) continue;
    const covers = h2.start <= start && h2.end >= end;
    const fine = (h2.d.end - h2.d.start) / h2.d.width <= (end - start) / W * 1.000001;
    if (covers && (h2.exact || fine)) return { d: h2.d, enough: true };
    const overlap = Math.max(0, Math.min(end, h2.end) - Math.max(start, h2.start)) / (end - start);
    const nsPerBin = (h2.d.end - h2.d.start) / h2.d.width;
    if (overlap > 0 && (!best || overlap > best.overlap || (overlap === best.overlap && nsPerBin < best.nsPerBin))) best = { d: h2.d, overlap, nsPerBin, enough: false };
  }
  return best;
}

function holdTimeline(key, start, end, d) {
  const held = tlState.held.filter((h2) => !(h2.key === key && h2.start === start && h2.end === end));
  held.push({ key, start, end, d, exact: exactTimeline(d) });
  tlState.held = held.slice(-12);  // each at most ~100K numbers
}

/** Search in the timeline: the spans named like a text (the registry's `find`), their count,
 *  and next / previous stepping through them (each shown on its producer, the matches outlined). */
async function timelineSearch(text, step = 0) {
  const q = tlState.search;
  if (!q || q.trace !== current.trace || q.text !== text) {
    const p = { name: "find", trace: current.trace, text, n: 1000, rel: 1 };
    if (current.sel.producers) p.producers = current.sel.producers.join(",");
    try {
      const d = await api("/api/ui/analysis", p);
      const col = (c) => d.columns.findIndex((x) => x.name === c);
      const [ci, ti, ei, pi] = ["span_id", "ts", "end_ts", "producer"].map(col);
      tlState.search = { trace: current.trace, text, i: -1, total: d.json && d.json.count !== undefined ? d.json.count : d.total,
        rows: d.rows.map((r) => ({ id: r[ci], ts: r[ti], end_ts: r[ei], producer: r[pi] })) };
    } catch (e) { showError(e); return; }
  }
  const s2 = tlState.search;
  if (!s2.rows.length) { s2.i = -1; if (current.page === "timeline") route(); else location.hash = hrefFor("timeline", current.trace); return; }
  s2.i = ((s2.i + step) % s2.rows.length + s2.rows.length) % s2.rows.length;
  if (step === 0) s2.i = 0;
  const r = s2.rows[s2.i], pad = Math.max((r.end_ts - r.ts) * 0.5, 1000);
  const sel = { start: r.ts - pad, end: r.end_ts + pad, producers: [r.producer] };
  if (current.page === "timeline") setSel(sel); else location.hash = hrefFor("timeline", current.trace, sel);
}

function searchBox() {
  const q = tlState.search && tlState.search.trace === current.trace ? tlState.search : null;
  const input = h("input", { name: "find", type: "search", placeholder: "find spans by name", value: q ? q.text : "", "aria-label": "find spans by name", size: 18 });
  const form = h("form", { class: "row search-tl", role: "search" }, input,
    h("button", { type: "submit" }, "Find"),
    h("button", { type: "button", "aria-label": "previous match", disabled: !q || !q.rows.length, onclick: () => timelineSearch(q.text, -1) }, "◀"),
    h("button", { type: "button", "aria-label": "next match", disabled: !q || !q.rows.length, onclick: () => timelineSearch(q.text, 1) }, "▶"),
    h("span", { class: "muted", "aria-live": "polite", "data-count": q ? q.total : null },
      q ? (q.rows.length ? `match ${q.i + 1} of ${fmtInt(q.total)}` + (q.total > q.rows.length ? ` (stepping through the first ${fmtInt(q.rows.length)})` : "") : `no span named like "${q.text}"`) : ""));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); if (input.value.trim()) timelineSearch(input.value.trim()); });
  return form;
}

function pageTimeline() {
  const info = current.info, t = info.trace;
  document.title = `${t.name} timeline · tracehouse`;
  if (t.ts_min === null) { main.append(h("p", {}, "no events")); return; }
  const tree = producerTree(info);
  const key = current.trace;
  if (!tlState.expanded.has(key)) tlState.expanded.set(key, new Set(tree.roots.length <= 12 ? tree.roots : []));
  const expanded = tlState.expanded.get(key);
  const only = current.sel.producers ? new Set(current.sel.producers) : null;
  // Visible rows: expanded producers alone, collapsed ones with all their descendants.
  const rows = [];
  const all = (id) => [id, ...(tree.kids.get(id) || []).flatMap(all)];
  const walk = (id, depth) => {
    const hasKids = tree.kids.has(id);
    if (!hasKids || expanded.has(id)) {
      rows.push({ ids: [id], depth, id, hasKids });
      if (hasKids) for (const k of tree.kids.get(id)) walk(k, depth + 1);
    } else rows.push({ ids: all(id), depth, id, hasKids });
  };
  const starts = only ? [...only].filter((id) => tree.byId.has(id)) : tree.roots;
  for (const r of starts) walk(r, 0);
  const PAGE = 40, pages = Math.max(1, Math.ceil(rows.length / PAGE));
  tlState.page = Math.min(tlState.page, pages - 1);
  const shown = rows.slice(tlState.page * PAGE, (tlState.page + 1) * PAGE);
  const start = current.sel.start ?? t.ts_min, end = current.sel.end ?? t.ts_max + 1;
  const labels = h("div", { id: "tl-labels" });
  const canvas = h("canvas");
  const box = h("div", { id: "tl-canvas-box", tabindex: 0, role: "application",
    "aria-label": "timeline: W S or + − zoom, A D or ← → pan, drag to pan, shift-drag to select a range, alt-drag to measure, click a span for details" }, canvas,
  h("div", { id: "tl-ruler", hidden: true }), h("div", { id: "tl-measure", hidden: true, role: "status" }));
  const details = h("div", { class: "details", "aria-live": "polite" }, "Click a span or tick for details.");
  const status = h("span", { class: "muted" });
  const pager = h("div", { class: "pager" },
    h("button", { onclick: () => { tlState.page--; route(); }, disabled: tlState.page === 0 }, "◀ rows"),
    h("span", {}, `rows ${tlState.page * PAGE + 1}–${Math.min(rows.length, (tlState.page + 1) * PAGE)} of ${rows.length}`),
    h("button", { onclick: () => { tlState.page++; route(); }, disabled: tlState.page >= pages - 1 }, "rows ▶"), status);
  main.append(h("h1", {}, `${t.name}: timeline`),
    h("p", { class: "muted" }, "Producers are rows (▸ expands a group); spans are bars per call depth, other events ticks, counters lines. ",
      h("span", { class: "kbd" }, "W"), h("span", { class: "kbd" }, "S"), " zoom, ", h("span", { class: "kbd" }, "A"), h("span", { class: "kbd" }, "D"),
      " pan, drag pans, shift-drag selects a range, alt-drag measures, wheel zooms."),
    searchBox(), pager, h("div", { id: "tl-hover", class: "muted", "aria-live": "off" }), h("div", { id: "timeline-wrap" }, h("div", {}), h("div", { id: "tl-axis", "aria-label": "time axis" }), labels, box), details);
  const W = Math.max(400, box.clientWidth || main.clientWidth - 240);
  const chosen = tlState.fields.get(key) || [];
  const params = Object.assign(selParams(), { start, end, width: Math.floor(W), rows: shown.map((r) => r.ids.join(",")).join(";"), max_depth: 12,
    fields: chosen.join(",") });
  delete params.producers;
  const msg = h("div"), fieldBox = h("div", { class: "row fields", role: "group", "aria-label": "fields drawn as lines" });
  main.insertBefore(fieldBox, $("#timeline-wrap"));
  main.insertBefore(msg, details);
  const fieldsOf = (d) => {
    // the value columns of counters and measurements: which are drawn (a row's in one track)
    const drawn = new Set((d.lines || []).map((l) => l.value));
    const names = [...new Set(Object.values(d.fields || {}).flat())];
    if (names.length > 1) fieldBox.replaceChildren(h("span", { class: "muted" }, "lines of:"), ...names.map((f) => h("label", {},
      h("input", { type: "checkbox", name: "field", value: f, checked: (chosen.length ? chosen.includes(f) : drawn.has(f)) || null, onchange: () => {
        tlState.fields.set(key, [...fieldBox.querySelectorAll("input:checked")].map((i) => i.value)); route(); } }), " " + f)));
  };
  const view = { start, end };
  const draw = (d, from) => {
    fieldsOf(d);
    drawTimeline(d, view, shown, labels, canvas, box, details, tree, expanded, W);
    canvas.dataset.drawn = from;
    canvas.dataset.start = view.start; canvas.dataset.end = view.end;
  };
  // Zoom and pan without a round trip: an answer held for a range around this one draws it at
  // once (no blank page while the server works); when it is exact here (bars and ticks one by
  // one) or at least as fine as a pixel, nothing is asked; else the range is asked at its own
  // resolution in the background and swapped in.
  const hkey = [current.trace, t.event_count, params.rows, params.fields, params.max_depth].join("|");  // (a trace written to since: asked again)
  const held = heldTimeline(hkey, start, end, W);
  if (held) draw(held.d, "held");
  if (held && held.enough) {
    status.textContent = `${fmtNs(end - start)} in view (drawn from the answer at hand)`;
  } else {
    status.textContent = held ? "drawn from the answer at hand; asking at this resolution…" : "loading…";
    fill(msg, () => api("/api/ui/timeline", params).catch((e) => { status.textContent = ""; throw e; }), (d) => {
      holdTimeline(hkey, start, end, d);
      status.textContent = `${fmtNs(d.end - d.start)} in view`;
      draw(d, "answer");
    });
  }
  if (tlState.refocus) { tlState.refocus = false; box.focus({ preventScroll: true }); }
  box.addEventListener("keydown", (ev) => { tlState.refocus = true; keyZoom(ev, start, end); if (!ev.defaultPrevented) tlState.refocus = false; });
  if (current.sel.start !== undefined && info.spans) {
    // area selection: the selected range x the selected producers, aggregated by name
    const area = h("div", { class: "panel", "data-area": "" });
    main.append(h("h2", {}, "Selected range" + (current.sel.producers ? " and producers" : "") + ", by name"), area);
    fill(area, () => api("/api/ui/stats", Object.assign({ by: "state" }, selParams())), (st) => {
      if (!st.table || !st.table.length) { area.append(h("p", { class: "muted" }, st.why || "no spans start in the selection")); return; }
      area.append(h("p", { class: "muted" }, `${fmtInt(st.spans)} spans starting in the selection, ${fmtInt(st.groups)} names` + (st.groups > st.table.length ? `; the ${st.table.length} with the most self time:` : ":")),
        h("table", { "aria-label": "selection by name" }, h("thead", {}, h("tr", {}, ["name", "count", "total", "self", "average", "max"].map((c, i) => h("th", { class: i ? "num" : null }, c)))),
          h("tbody", {}, st.table.map((r) => h("tr", {}, h("td", {}, r.label), h("td", { class: "num" }, fmtInt(r.spans)), h("td", { class: "num" }, fmtNs(r.total_dur)),
            h("td", { class: "num" }, fmtNs(r.self_dur)), h("td", { class: "num" }, fmtNs(r.mean_dur)), h("td", { class: "num" }, fmtNs(r.max_dur)))))));
    });
  }
}

/** A row's counter series drawn in one track: on one scale when their ranges are alike, else
 *  each on its own (a legend beside the track says which colour is which, and its range). */
function lineTrack(lines) {
  const lo = lines.map((l) => Math.min(...l.lo)), hi = lines.map((l) => Math.max(...l.hi));
  const all = [Math.min(...lo), Math.max(...hi)];
  const widths = lines.map((l, i) => hi[i] - lo[i]);
  const shared = lines.length === 1 || Math.max(...widths) <= 20 * Math.max(1e-300, Math.min(...widths)) && all[1] - all[0] <= 20 * Math.max(1e-300, Math.max(...widths));
  return lines.map((l, i) => ({ line: l, color: pal(i), lo: shared ? all[0] : lo[i], hi: shared ? all[1] : hi[i], own: [lo[i], hi[i]], shared }));
}
const lineName = (l) => `${l.type}.${l.value}${l.series ? " " + l.series : ""}`;

/** Draw timeline answer `d` over `view` ([start, end) in ns from the trace's start): the answer
 *  may be for a wider or narrower range than the view (one held from before: client-side zoom
 *  and pan); its bars and ticks are placed by time, its per-pixel bins by the time they cover. */
function drawTimeline(d, view, shown, labels, canvas, box, details, tree, expanded, W) {
  const LEVEL = 11, TICK = 12, SERIES = 13, NAME = 16;
  const linesBy = new Map();
  for (const l of d.lines || []) { if (!linesBy.has(l.producer)) linesBy.set(l.producer, []); linesBy.get(l.producer).push(l); }
  const layout = d.rows.map((row) => {
    const lines = row.producers.length === 1 ? lineTrack(linesBy.get(row.producers[0]) || []) : [];
    const track = lines.length ? Math.max(40, SERIES * lines.length + 6) : 0;
    const above = row.levels.reduce((a, lv) => a + (lv.mode === "sum" ? 2 : 1) * LEVEL, 0) + row.ticks.length * TICK;
    const gap = lines.length ? Math.max(0, NAME - 2 - above) : 0;  // the track (and its legend) under the row's name
    const hgt = Math.max(18, above + gap + track + 4);
    return { row, lines, track, gap, hgt };
  });
  const H = layout.reduce((a, r) => a + r.hgt, 0) + 16;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = W * dpr; canvas.height = H * dpr; canvas.style.width = W + "px"; canvas.style.height = H + "px";
  canvas.style.transform = "";
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.font = "10px system-ui, sans-serif";
  const v0 = view.start, span = view.end - view.start, px = (t) => ((t - v0) / span) * W, tAt = (x) => v0 + span * x / W;
  // the answer's per-pixel bins: bin b of n covers [d.start + b * dspan / n, ...), wherever that is in the view
  const dspan = d.end - d.start;
  const binX = (b, n) => px(d.start + b * dspan / n);
  const binAt = (x, n) => Math.floor((tAt(x) - d.start) * n / dspan);
  const names = d.names || {};
  const hits = [];
  // the search's matches, outlined (the current one in red)
  const q = tlState.search && tlState.search.trace === current.trace ? tlState.search : null;
  const found = new Map(q ? q.rows.map((r, i) => [r.id, i === q.i]) : []);
  labels.replaceChildren();
  let y = 0;
  layout.forEach(({ row, lines, track, gap, hgt }, i) => {
    const meta = shown[i];
    const p = tree.byId.get(meta.id) || { name: String(meta.id), kind: "" };
    const tog = meta.hasKids ? h("button", { "aria-expanded": String(expanded.has(meta.id)), "aria-label": (expanded.has(meta.id) ? "collapse " : "expand ") + p.name,
      onclick: () => { expanded.has(meta.id) ? expanded.delete(meta.id) : expanded.add(meta.id); route(); } }, expanded.has(meta.id) ? "▾" : "▸") : h("span", { style: "width:1em;display:inline-block" });
    const lab = h("div", { class: "lab", style: `height:${hgt}px;padding-left:${4 + meta.depth * 10}px`, title: `${p.kind} ${p.name} (id ${meta.id})` },
      tog, h("span", {}, p.name + (meta.ids.length > 1 ? ` (+${meta.ids.length - 1})` : "")));
    labels.append(lab);
    g.fillStyle = i % 2 ? "#fafbfc" : "#fff"; g.fillRect(0, y, W, hgt);
    let yy = y + 2;
    for (const lv of row.levels) {
      if (lv.mode === "sum") {
        // a collapsed group: how many of its producers are busy, per pixel (the sum of its subtree)
        const max = Math.max(1, ...lv.busy), n = lv.busy.length;
        for (let b = 0; b < n; b++) {
          if (lv.busy[b] <= 0) continue;
          const hh = Math.max(1, (2 * LEVEL - 1) * lv.busy[b] / max), x0 = binX(b, n);
          g.fillStyle = lv.name[b] >= 0 ? color(names[lv.name[b]] ?? lv.name[b]) : "#889";
          g.fillRect(x0, yy + 2 * LEVEL - 1 - hh, Math.max(1, binX(b + 1, n) - x0), hh);
        }
        hits.push({ x0: 0, x1: W, y0: yy, y1: yy + 2 * LEVEL - 1, what: "sum", busy: lv.busy, name: lv.name, spans: lv.spans, producers: lv.producers, label: row.label });
        yy += LEVEL;  // two levels high
      } else if (lv.mode === "cut") {
        g.fillStyle = "#778"; g.fillText(`depth ${lv.depth} and deeper: zoom in to see them`, 4, yy + 8);
      } else if (lv.mode === "items") {
        for (let k = 0; k < lv.ts.length; k++) {
          const x0 = Math.max(0, px(lv.ts[k])), x1 = Math.min(W, px(lv.ts[k] + lv.dur[k]));
          if (x1 < 0 || x0 > W) continue;
          const nm = names[lv.name[k]] ?? lv.name[k];
          g.fillStyle = color(nm); g.fillRect(x0, yy, Math.max(1, x1 - x0), LEVEL - 1);
          if (found.has(lv.id[k])) {
            g.save(); g.strokeStyle = found.get(lv.id[k]) ? "#d00" : "#111"; g.lineWidth = found.get(lv.id[k]) ? 2 : 1;
            g.strokeRect(x0 + 0.5, yy + 0.5, Math.max(1, x1 - x0) - 1, LEVEL - 2); g.restore();
          }
          if (x1 - x0 > 30) { g.fillStyle = "#111"; g.fillText(String(nm).slice(0, Math.floor((x1 - x0) / 6)), x0 + 2, yy + 8, x1 - x0 - 3); }
          hits.push({ x0, x1: Math.max(x0 + 1, x1), y0: yy, y1: yy + LEVEL - 1, what: "span", id: lv.id[k], name: nm, ts: lv.ts[k], dur: lv.dur[k], depth: lv.depth, producer: row.producers[0] });
        }
      } else {
        const n = lv.busy.length;
        for (let b = 0; b < n; b++) {
          if (lv.busy[b] <= 0) continue;
          const x0 = binX(b, n);
          g.globalAlpha = 0.35 + 0.65 * lv.busy[b];
          g.fillStyle = lv.name[b] >= 0 ? color(names[lv.name[b]] ?? lv.name[b]) : "#889";
          g.fillRect(x0, yy, Math.max(1, binX(b + 1, n) - x0), LEVEL - 1);
        }
        g.globalAlpha = 1;
        hits.push({ x0: 0, x1: W, y0: yy, y1: yy + LEVEL - 1, what: "level", depth: lv.depth, spans: lv.spans });
      }
      yy += LEVEL;
    }
    // each instant type its own strip (one strip drew over another)
    row.ticks.forEach((tk, ti) => {
      g.fillStyle = pal(ti);
      if (tk.mode === "items") {
        for (const ts of tk.ts) { const x = px(ts); if (x >= -1 && x <= W) g.fillRect(x, yy, 1, TICK - 2); }
      } else {
        const max = Math.max(1, ...tk.counts), n = tk.counts.length;
        for (let b = 0; b < n; b++) if (tk.counts[b]) {
          const hh = Math.max(1, (TICK - 2) * tk.counts[b] / max), x0 = binX(b, n);
          g.fillRect(x0, yy + TICK - 2 - hh, Math.max(1, binX(b + 1, n) - x0), hh);
        }
      }
      if (row.ticks.length > 1) { g.fillStyle = "#556"; g.fillText(tk.type, W - 4 - g.measureText(tk.type).width, yy + 8); }
      hits.push({ x0: 0, x1: W, y0: yy, y1: yy + TICK - 1, what: "ticks", type: tk.type, events: tk.events, items: tk.mode === "items" ? tk.ts : null, counts: tk.counts || null });
      yy += TICK;
    });
    // the counter series of the row: one track, a colour each, named in the legend beside it
    if (lines.length) {
      yy += gap;
      const legend = h("div", { class: "series-legend", style: `top:${yy - y}px`, role: "list", "aria-label": "series" });
      lines.forEach((ln) => {
        const l = ln.line, rng = ln.hi - ln.lo || 1;
        const yv = (v) => yy + track - 4 - ((v - ln.lo) / rng) * (track - 10);
        // each pixel's min to max, faint, under the line of its means
        g.fillStyle = ln.color; g.globalAlpha = 0.18;
        l.bin.forEach((b, k) => { const x0 = binX(b, d.width); g.fillRect(x0, yv(l.hi[k]), Math.max(1, binX(b + 1, d.width) - x0), Math.max(1, yv(l.lo[k]) - yv(l.hi[k]))); });
        g.globalAlpha = 1;
        g.strokeStyle = ln.color; g.lineWidth = 1.25; g.beginPath();
        l.bin.forEach((b, k) => { const xx = binX(b + 0.5, d.width); k ? g.lineTo(xx, yv(l.mean[k])) : g.moveTo(xx, yv(l.mean[k])); });
        g.stroke(); g.lineWidth = 1;
        legend.append(h("div", { role: "listitem", style: `--c:${ln.color}`, title: `${lineName(l)}: ${ln.own[0]} … ${ln.own[1]}${ln.shared ? "" : " (its own scale)"}`,
          "data-series": lineName(l) }, h("span", { class: "sw" }), `${l.value}${l.series ? " " + l.series : ""} `,
        h("span", { class: "muted" }, `${+ln.own[0].toPrecision(4)}…${+ln.own[1].toPrecision(4)}`)));
      });
      lab.append(legend);
      hits.push({ x0: 0, x1: W, y0: yy, y1: yy + track - 1, what: "lines", lines });
      yy += track;
    }
    g.strokeStyle = "#e3e6ea"; g.beginPath(); g.moveTo(0, y + hgt - 0.5); g.lineTo(W, y + hgt - 0.5); g.stroke();
    y += hgt;
  });
  // the axis: HTML (readable, selectable), its labels with as many digits as tell them apart
  const tick = tickFormat(v0, view.end, span / 5), axis = $("#tl-axis");
  if (axis) axis.replaceChildren(...[0, 1, 2, 3, 4, 5].map((k) => h("span", { style: k === 5 ? "right:0" : `left:${k * 20}%` }, tick(v0 + span * k / 5))));
  // interactions: click = details, drag = pan, shift-drag = select, alt-drag = measure, wheel = zoom.
  // Pan and zoom move the picture at hand at once (a CSS transform of the canvas, no round trip),
  // then the new range is drawn from the answer at hand and asked again when that is too coarse.
  const at = (ev) => { const r = box.getBoundingClientRect(); return [(ev.clientX - r.left) * W / r.width, ev.clientY - r.top]; };
  const exact = tickFormat(v0, view.end, span / W);  // one pixel's worth of digits
  const hover = $("#tl-hover"), ruler = $("#tl-ruler"), measure = $("#tl-measure");
  // the counter values of a track at x: per series [line, the index of its last bin at or before
  // x] (a counter holds its value until its next sample; k < 0: none before x)
  const valuesAt = (hit, x) => hit.lines.map((ln) => {
    const bins = ln.line.bin, want = binAt(x, d.width);
    let lo = 0, hi = bins.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (bins[m] <= want) lo = m + 1; else hi = m; }
    return [ln, lo - 1];
  });
  const valueText = ([ln, k]) => `${lineName(ln.line)} = ` + (k >= 0 ? `${+ln.line.mean[k].toPrecision(6)} (min ${ln.line.lo[k]}, max ${ln.line.hi[k]})` : "no sample before");
  const lineAt = (x, yc) => {
    const hit = hits.find((hh) => (hh.what === "lines" || hh.what === "ticks") && yc >= hh.y0 && yc <= hh.y1);
    if (hit && hit.what === "ticks") return hit.items ? " · " + instantAt(hit, x, tAt(x), px, exact, binAt).split(";")[0] : "";
    return hit ? valuesAt(hit, x).filter(([, k]) => k >= 0).map((v) => " · " + valueText(v)).join("") : "";
  };
  let drag = null;
  canvas.style.transformOrigin = "0 0";
  canvas.onmousedown = (ev) => { drag = { x: at(ev)[0], shift: ev.shiftKey, alt: ev.altKey, moved: false }; ev.preventDefault(); };
  canvas.onmouseleave = () => { if (hover) hover.textContent = ""; if (ruler) ruler.hidden = true; };
  canvas.onmousemove = (ev) => {
    const [x, yc] = at(ev);
    const t = tAt(x);
    if (hover) { hover.textContent = `t = ${exact(t)}` + lineAt(x, yc); hover.dataset.t = Math.round(t); }
    if (ruler) { ruler.hidden = false; ruler.style.left = (x * box.getBoundingClientRect().width / W) + "px"; }
    if (!drag) return;
    if (Math.abs(x - drag.x) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.alt) {
      const t0 = tAt(Math.min(x, drag.x)), t1 = tAt(Math.max(x, drag.x));
      measure.hidden = false; measure.style.left = Math.min(x, drag.x) * box.getBoundingClientRect().width / W + "px";
      measure.style.width = Math.abs(x - drag.x) * box.getBoundingClientRect().width / W + "px";
      measure.textContent = `Δ ${fmtNs(t1 - t0)}`; measure.dataset.ns = Math.round(t1 - t0);
      measure.title = `${exact(t0)} – ${exact(t1)}`;
    } else if (drag.shift) { g.save(); g.fillStyle = "rgba(31,111,235,.08)"; g.fillRect(Math.min(x, drag.x), 0, 2, H); g.restore(); }
    else canvas.style.transform = `translateX(${(x - drag.x) * box.getBoundingClientRect().width / W}px)`;  // pan at once
  };
  canvas.onmouseup = (ev) => {
    const [x, yc] = at(ev);
    const dd = drag; drag = null;
    if (dd && dd.moved) {
      const t0 = tAt(Math.min(x, dd.x)), t1 = tAt(Math.max(x, dd.x));
      if (dd.alt) return;  // a measure stays shown until the next
      if (dd.shift) setSel({ start: t0, end: t1, producers: current.sel.producers });
      else { const shift = span * (dd.x - x) / W; setSel({ start: view.start + shift, end: view.end + shift, producers: current.sel.producers }); }
      return;
    }
    if (measure) measure.hidden = true;
    const hit = hits.find((hh) => x >= hh.x0 - 1 && x <= hh.x1 + 1 && yc >= hh.y0 && yc <= hh.y1);
    const t = tAt(x);
    if (!hit) { details.textContent = `t = ${exact(t)}`; return; }
    if (hit.what === "span") sliceDetails(details, hit);
    else if (hit.what === "level") details.textContent = `depth ${hit.depth}: ${fmtInt(hit.spans)} spans in view (zoom in to see them one by one); t = ${exact(t)}`;
    else if (hit.what === "sum") { const b = binAt(x, hit.busy.length), nm = hit.name[b] >= 0 ? names[hit.name[b]] ?? hit.name[b] : null;
      details.textContent = `${hit.label}: ${(hit.busy[b] || 0).toFixed(2)} of ${hit.producers} producers busy here` + (nm !== null ? ` (busiest in ${nm})` : "") +
        `; ${fmtInt(hit.spans)} top-level spans in view; t = ${exact(t)}`; }
    else if (hit.what === "ticks") details.textContent = instantAt(hit, x, t, px, exact, binAt);
    else if (hit.what === "lines") details.replaceChildren(...valuesAt(hit, x).map((v) => h("div", { "data-series": lineName(v[0].line) },
      h("span", { class: "sw", style: `--c:${v[0].color}` }), valueText(v) + ` at ${exact(t)}`)));
  };
  let zoom = 1;  // the wheel's zoom so far, shown at once by scaling the picture at hand
  canvas.onwheel = (ev) => {
    ev.preventDefault();
    const f = at(ev)[0] / W, t = tAt(at(ev)[0]);
    zoom *= ev.deltaY > 0 ? 1 / 1.5 : 1.5;
    const px0 = f * box.getBoundingClientRect().width;
    canvas.style.transform = `translateX(${px0 * (1 - zoom)}px) scaleX(${zoom})`;
    clearTimeout(canvas._wheel);
    canvas._wheel = setTimeout(() => setSel({ start: t - span / zoom * f, end: t + span / zoom * (1 - f), producers: current.sel.producers }), 250);
  };
}

/** What a click on an instant strip at x says: the instant under the cursor (the nearest within
 *  3 pixels, exact to the ns, and how many share its pixel), or the count of its pixel's bin. */
function instantAt(hit, x, t, px, exact, binAt) {
  if (hit.items) {
    const ts = hit.items;
    let lo = 0, hi = ts.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (ts[m] < t) lo = m + 1; else hi = m; }
    const near = [lo - 1, lo].filter((k) => k >= 0 && k < ts.length).sort((a, b) => Math.abs(ts[a] - t) - Math.abs(ts[b] - t))[0];
    if (near !== undefined && Math.abs(px(ts[near]) - x) <= 3) {
      const same = ts.filter((v) => Math.abs(px(v) - px(ts[near])) < 1).length;
      return `${hit.type} at ${fmtNsExact(ts[near])}` + (same > 1 ? ` (${same} in this pixel)` : "") + `; ${fmtInt(hit.events)} in view`;
    }
    return `${hit.type}: none under the cursor (${fmtInt(hit.events)} in view); t = ${exact(t)}`;
  }
  const b = binAt(x, hit.counts.length), n = hit.counts[b] || 0;
  return `${hit.type}: ${fmtInt(n)} here (this pixel's bin; zoom in to see them one by one), ${fmtInt(hit.events)} in view; t = ${exact(t)}`;
}

/** A span's details (the registry's `span` analysis): its arguments, producer, self time,
 *  children, and links to its parent, to the spans of the same name and to the calls inside it. */
function sliceDetails(box, hit) {
  box.replaceChildren(h("b", {}, String(hit.name)), ` span ${hit.id}, depth ${hit.depth}, start ${fmtNsExact(hit.ts)}, duration ${fmtNs(hit.dur)} `,
    h("a", { href: hrefFor("timeline", current.trace, { start: hit.ts - hit.dur * 0.1, end: hit.ts + hit.dur * 1.1, producers: current.sel.producers }) }, "zoom to it"), " · ",
    h("a", { href: hrefFor("calls", current.trace, { start: hit.ts, end: hit.ts + Math.max(1, hit.dur), producers: [hit.producer] }) }, "calls inside it"));
  const more = h("div", { class: "slice" });
  box.append(more);
  fill(more, () => api("/api/ui/analysis", { name: "span", trace: current.trace, span_id: hit.id, rel: 1 }), (d) => {
    const row = Object.fromEntries(d.columns.map((c, i) => [c.name, d.rows[0][i]]));
    const own = new Set(["name", "producer_name", "children", "children_dur", "span_id", "ts", "end_ts", "dur", "self_time", "producer",
      "depth", "parent_id", "closed", "seq", "end_seq"]);
    const args = d.columns.filter((c) => !own.has(c.name) && row[c.name] !== null);
    const dd = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
    more.append(h("dl", { class: "meta", "aria-label": "span details" },
      ...dd("name", String(row.name)), ...dd("producer", `${row.producer_name} (id ${row.producer})`),
      ...dd("start", fmtNsExact(row.ts)), ...dd("duration", `${fmtNs(row.dur)}${row.closed === false ? " (unclosed: cut)" : ""}`),
      ...dd("self time", fmtNs(row.self_time)), ...dd("children", `${fmtInt(row.children)} (${fmtNs(row.children_dur)})`),
      ...dd("depth", String(row.depth)),
      ...dd("parent", row.parent_id === null || row.parent_id < 0 ? "none (a root call)"
        : h("button", { class: "link", onclick: () => parentDetails(box, hit, row.parent_id) }, `span ${row.parent_id}`)),
      ...args.flatMap((c) => dd(c.name, `${typeof row[c.name] === "object" ? JSON.stringify(row[c.name]) : row[c.name]}${c.unit ? " " + c.unit : ""}`)),
      ...dd("same name", h("button", { class: "link", onclick: () => timelineSearch(String(row.name)) }, `find "${row.name}" in the timeline`)),
      // An OpenTelemetry span: its trace's waterfall (its own span_id column is begin_span_id here, beside the index's span_id).
      ...(current.info.trace.format === "otlp" && typeof row.trace_id === "string" && typeof row.begin_span_id === "string"
        ? dd("trace", h("a", { href: `#/waterfall/${encodeURIComponent(current.trace)}?tid=${row.trace_id}&span=${row.begin_span_id}` }, `waterfall of trace ${row.trace_id}`)) : [])));
  });
}

async function parentDetails(box, hit, id) {
  try {
    const d = await api("/api/ui/analysis", { name: "span", trace: current.trace, span_id: id, rel: 1 });
    const row = Object.fromEntries(d.columns.map((c, i) => [c.name, d.rows[0][i]]));
    sliceDetails(box, { id, name: row.name, ts: row.ts, dur: row.dur, depth: row.depth, producer: row.producer });
  } catch (e) { showError(e); }
}

// ---------------------------------------------------------------- Calls: flame graph and call tree

function pageCalls() {
  const info = current.info, t = info.trace;
  document.title = `${t.name} calls · tracehouse`;
  const threads = info.producers;
  const pick = h("select", { "aria-label": "thread" }, h("option", { value: "" }, "whole trace"),
    threads.slice(0, 2000).map((p) => h("option", { value: p.id, selected: current.sel.producers && current.sel.producers.length === 1 && current.sel.producers[0] === p.id }, `${p.name} (${p.kind} ${p.id})`)));
  pick.addEventListener("change", () => setSel({ start: current.sel.start, end: current.sel.end, producers: pick.value ? [Number(pick.value)] : undefined }));
  const flameBox = h("div", { class: "flame" }), frameBox = h("div"), treeBox = h("div");
  main.append(h("h1", {}, `${t.name}: calls`),
    h("div", { class: "row" }, h("label", {}, "of", pick), h("span", { class: "muted" }, "Flame graph of the spans in the selection (time clipped to the range). Click a frame to zoom into it and list the spans behind it.")),
    flameBox, frameBox, h("h2", {}, "Call tree"), treeBox);
  fill(flameBox, () => api("/api/ui/flame", selParams()), (d) => {
    if (!d.nodes.length) { flameBox.append(h("p", { class: "muted" }, d.why || "no spans in this selection")); treeBox.replaceChildren(); return; }
    drawFlame(flameBox, d, null, frameBox);
    callTree(treeBox, d, frameBox);
  });
}

function flameLayout(d) {
  const byId = new Map(d.nodes.map((n) => [n.id, Object.assign({ kids: [] }, n)]));
  const roots = [];
  for (const n of byId.values()) (n.parent >= 0 && byId.has(n.parent) ? byId.get(n.parent).kids : roots).push(n);
  for (const n of byId.values()) n.kids.sort((a, b) => b.total - a.total);
  roots.sort((a, b) => b.total - a.total);
  return { byId, roots };
}

/** Zoom the flame graph into a frame: its subtree is asked of the server (the whole-graph answer
 *  holds only the frames over its threshold), drawn full width under its ancestors. */
function zoomFlame(box, whole, node, frameBox) {
  fill(box, () => api("/api/ui/flame", Object.assign(selParams(), { root: node.id })), (sub) => drawFlame(box, sub, node.id, frameBox, whole));
  frameSpans(frameBox, node);
}

/** A flame graph of `d` (its nodes), focused on `focusId` (null: all); a click on a frame calls
 *  `zoom(node)`: by default asks the server for the frame's subtree (`zoomFlame`). */
function drawFlame(box, d, focusId, frameBox, whole = d, zoom = null) {
  const fmtV = d.unit === "" ? fmtInt : fmtNs, what = d.what || "spans";
  const onZoom = zoom || ((n) => zoomFlame(box, whole, n, frameBox));
  const { byId, roots } = flameLayout(d);
  const W = 1200, ROW = 17;
  let maxDepth = 0;
  for (const n of byId.values()) maxDepth = Math.max(maxDepth, n.depth);
  const svg = s("svg", { viewBox: `0 0 ${W} ${(maxDepth + 1) * ROW}`, role: "img", "aria-label": `flame graph, ${d.nodes.length} call paths` });
  const focus = focusId !== null ? byId.get(focusId) : null;
  const total = focus ? focus.total : d.total;
  // "other": the time of the frames under the threshold, one grey frame after a frame's children
  const other = (x, depth, ns, scale) => {
    const w = ns * scale;
    if (w < 0.5) return;
    svg.append(s("rect", { x, y: depth * ROW, width: w, height: ROW - 1, class: "other", fill: "#c8ccd2" },
      s("title", {}, `other: ${fmtV(ns)} in frames under ${fmtV(d.threshold_ns)} (zoom in to see them)`)));
    if (w > 40) svg.append(s("text", { x: x + 3, y: depth * ROW + 12 }, "other"));
  };
  const place = (n, x, scale) => {
    const w = n.total * scale;
    if (w < 0.5) return;
    const r = s("rect", { x, y: n.depth * ROW, width: Math.max(0.5, w), height: ROW - 1, fill: color(n.name), "data-node": n.id },
      s("title", {}, `${n.name}\n${fmtInt(n.calls)} ${d.what ? what : "calls"}, total ${fmtV(n.total)}, self ${fmtV(n.self)} (${(100 * n.total / d.total).toFixed(2)}%)`));
    r.addEventListener("click", () => onZoom(n));
    svg.append(r);
    if (w > 40) svg.append(s("text", { x: x + 3, y: n.depth * ROW + 12 }, n.name.slice(0, Math.floor(w / 6.5))));
    let cx = x;
    for (const k of n.kids) { place(k, cx, scale); cx += k.total * scale; }
    if (n.cut) other(cx, n.depth + 1, n.cut, scale);
  };
  if (focus) {
    // ancestors full width, then the focused frame's subtree scaled to the width
    let a = focus.parent >= 0 ? byId.get(focus.parent) : null;
    while (a) {
      const r = s("rect", { x: 0, y: a.depth * ROW, width: W, height: ROW - 1, fill: "#ccd", "data-node": a.id }, s("title", {}, a.name));
      const an = a; r.addEventListener("click", () => onZoom(an));
      svg.append(r, s("text", { x: 3, y: a.depth * ROW + 12 }, a.name));
      a = a.parent >= 0 ? byId.get(a.parent) : null;
    }
    place(focus, 0, W / total);
  } else {
    let x = 0;
    for (const r of roots) { place(r, x, W / total); x += r.total * W / total; }
    if (d.total > x * total / W) other(x, 0, d.total - x * total / W, W / total);
  }
  box.replaceChildren(h("p", { class: "muted" }, `${fmtInt(d.spans)} ${what}, ${fmtInt(d.paths)} call paths (${d.nodes.length} drawn: those over ${fmtV(d.threshold_ns)}), ${fmtV(d.total)} in all. `,
    focus ? h("button", { onclick: () => drawFlame(box, whole, null, frameBox, whole, zoom) }, "reset zoom") : ""), svg);
}

async function frameSpans(box, node) {
  box.replaceChildren(h("h2", {}, `Spans behind ${node.name}`));
  const inner = h("div");
  box.append(inner);
  fill(inner, () => api("/api/ui/frame", Object.assign({ node: node.id, n: 50 }, selParams())), (d) => {
    inner.append(h("p", { class: "muted" }, `path ${d.path.join(" → ")}: ${fmtInt(d.count)} spans; the 50 longest:`));
    spanTable(inner, d.rows);
  });
}

function callTree(box, d, frameBox) {
  const { roots } = flameLayout(d);
  const item = (n) => {
    const more = n.kids.length || n.cut > 0;  // children drawn, or left out of the answer (asked for on expanding)
    const li = h("li", { role: "treeitem", "aria-expanded": more ? "false" : null, "data-node": n.id, "data-cut": n.cut > 0 ? n.cut : null });
    const kids = h("ul", { class: "tree", role: "group", hidden: true });
    const tog = more ? h("button", { class: "tog", "aria-label": "expand " + n.name }, "▸") : h("span", { class: "tog" }, " ");
    const open = async (on) => {
      if (!more || n.asking) return;  // its children are on their way
      if (on && n.cut > 0 && !n.asked) {
        n.asked = n.asking = true;
        try {
          const sub = await api("/api/ui/flame", Object.assign(selParams(), { root: n.id }));
          const got = flameLayout(sub).byId.get(n.id);
          if (got) n.kids = got.kids;
        } catch (e) { showError(e); } finally { n.asking = false; }
      }
      kids.hidden = !on; li.setAttribute("aria-expanded", on); tog.textContent = on ? "▾" : "▸";
      if (on && !kids.childElementCount) appendItems(kids, n.kids);
    };
    if (more) tog.addEventListener("click", () => open(kids.hidden));
    const name = h("button", { class: "name", title: "list the spans behind this call path", onclick: () => frameSpans(frameBox, n) }, n.name);
    li.append(h("div", { class: "node" }, h("span", {}, tog, name), h("span", { class: "num" }, fmtInt(n.calls)),
      h("span", { class: "num" }, fmtNs(n.total)), h("span", { class: "num" }, fmtNs(n.self))), kids);
    li._open = open;
    return li;
  };
  // A level shows its 100 largest paths first; "more" adds the next 100 (a trace may have thousands of roots).
  const appendItems = (ul, list, from = 0) => {
    list.slice(from, from + 100).forEach((k) => ul.append(item(k)));
    if (list.length > from + 100) {
      const more = h("li", {}, h("button", { onclick: () => { more.remove(); appendItems(ul, list, from + 100); } }, `${list.length - from - 100} more…`));
      ul.append(more);
    }
  };
  const top = h("ul", { class: "tree", role: "tree", "aria-label": "call tree" });
  appendItems(top, roots);
  if (roots.length === 1) top.firstChild._open(true);
  box.replaceChildren(h("div", { class: "node muted", style: "display:grid;grid-template-columns:1fr 6rem 7rem 7rem;gap:.5rem;padding-left:1rem" },
    h("span", {}, "call path"), h("span", {}, "calls"), h("span", {}, "total"), h("span", {}, "self")), top);
}

// ---------------------------------------------------------------- SQL console

const sqlState = { text: "", page: 0 };

function pageSql() {
  document.title = "SQL · tracehouse";
  const area = h("textarea", { class: "sql", "aria-label": "SQL query", spellcheck: "false" });
  area.value = sqlState.text || "SELECT name, format, event_count, ts_min, ts_max FROM th.traces ORDER BY event_count DESC";
  const examples = h("select", { "aria-label": "example queries" }, h("option", { value: "" }, "example queries…"));
  const out = h("div"), info = h("p", { class: "muted", "aria-live": "polite" });
  // Cancel stops the query on the server (its query process is killed), not only the wait here.
  const cancel = h("button", { disabled: true, onclick: async () => {
    cancel.disabled = true;
    try { await api("/api/ui/sql/cancel", {}, { method: "POST", body: JSON.stringify({ id: sqlState.id }), headers: { "content-type": "application/json" } }); } catch (e) { showError(e); }
  } }, "Cancel");
  const run = async (page = 0) => {
    sqlState.text = area.value; sqlState.page = page;
    const id = sqlState.id = Date.now().toString(36) + Math.random().toString(36).slice(2);
    info.textContent = "running…"; clearError(); cancel.disabled = false;
    try {
      const d = await api("/api/ui/sql", {}, { method: "POST", body: JSON.stringify({ sql: area.value, page, page_size: 100, id }), headers: { "content-type": "application/json" } });
      if (sqlState.id !== id) return;  // a later run (or a cancel and a new run) answers instead
      cancel.disabled = true;
      info.textContent = `${d.rows.length} rows (page ${d.page + 1}${d.has_more ? ", more follow" : ""}) in ${(d.seconds * 1000).toFixed(1)} ms`;
      const jump = await sqlJump(area.value, d.columns);
      const flameBox = h("div", { class: "flame" });
      if (foldedStacks(d)) {
        // folded stacks (`a;b;c` and a number, or `a;b;c 12` lines): the whole answer's flame graph
        fill(flameBox, () => api("/api/ui/sql", {}, { method: "POST", body: JSON.stringify({ sql: area.value, flame: true }), headers: { "content-type": "application/json" } }), (f) => {
          if (!f.flame) return;
          const zoom = (n) => drawFlame(flameBox, f.flame, n.id, null, f.flame, zoom);
          drawFlame(flameBox, f.flame, null, null, f.flame, zoom);
        });
      }
      out.replaceChildren(flameBox, h("div", { class: "pager" },
        h("button", { disabled: d.page === 0, onclick: () => run(d.page - 1) }, "◀ previous"),
        h("button", { disabled: !d.has_more, onclick: () => run(d.page + 1) }, "next ▶")),
      jump ? h("p", { class: "muted" }, "Click a row to see it on the timeline.") : null,
      resultTable(d.columns, d.rows, d.types, jump));
    } catch (e) {
      if (sqlState.id !== id) return;
      cancel.disabled = true;
      info.textContent = "";
      out.replaceChildren(h("pre", { class: "sql-error", role: "alert" }, e.message));
    }
  };
  const download = async (format) => {
    try {
      const res = await api("/api/ui/sql/download", {}, { method: "POST", raw: true, body: JSON.stringify({ sql: area.value, format }), headers: { "content-type": "application/json" } });
      const blob = await res.blob();
      const a = h("a", { href: URL.createObjectURL(blob), download: "query." + format });
      document.body.append(a); a.click(); a.remove();
    } catch (e) { showError(e); }
  };
  area.addEventListener("keydown", (ev) => { if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); run(0); } });
  examples.addEventListener("change", () => { if (examples.value) { area.value = examples.value; area.focus(); } });
  api("/api/ui/examples").then((d) => {
    const groups = new Map();
    for (const ex of d.examples) { if (!groups.has(ex.format)) groups.set(ex.format, h("optgroup", { label: `${ex.format} (${ex.trace})` })); groups.get(ex.format).append(h("option", { value: ex.sql }, ex.title)); }
    examples.append(...groups.values());
  }).catch(showError);
  main.append(h("h1", {}, "SQL console"),
    h("p", { class: "muted" }, "Read-only DuckDB SQL over the store: ", h("code", {}, '"<trace>".<event_type>'), ", ", h("code", {}, '"<trace>".events'), ", ",
      h("code", {}, "th.traces"), ", ", h("code", {}, "th.producers"), ", ", h("code", {}, "th.results"), ". ", h("span", { class: "kbd" }, "Ctrl"), "+", h("span", { class: "kbd" }, "Enter"), " runs."),
    h("div", { class: "row" }, examples), area,
    h("div", { class: "row" }, h("button", { class: "primary", onclick: () => run(0) }, "Run"), cancel,
      h("button", { onclick: () => download("csv") }, "Download CSV"), h("button", { onclick: () => download("parquet") }, "Download Parquet"), info),
    out);
  if (sqlState.text) run(sqlState.page);
}

/** Whether a SQL answer looks like folded stacks: a `a;b;c` text and an integer, or one text
 *  column of `a;b;c 12` lines (the server says for the whole answer). */
function foldedStacks(d) {
  const t = d.types || [], text = /^(large_)?string$/.test(t[0] || "");
  const stacky = d.rows.some((r) => typeof r[0] === "string" && r[0].includes(";"));
  if (d.columns.length === 2) return text && /int|decimal/.test(t[1]) && stacky;
  return d.columns.length === 1 && text && stacky && d.rows.every((r) => r[0] === null || /^\S.* \d+$/.test(r[0]));
}

/** A result table; with `jump(row)` (an address or null) a row with a time opens on the timeline. */
function resultTable(columns, rows, types, jump = null) {
  const numeric = (types || []).map((t) => /int|float|double|decimal/.test(t));
  const go = (r) => { const href = jump && jump(r); if (href) location.hash = href; };
  return h("div", { class: "scroll" }, h("table", { "aria-label": "query result", class: jump ? "jumps" : null },
    h("thead", {}, h("tr", {}, columns.map((c, i) => h("th", { class: numeric[i] ? "num" : null }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", jump ? { onclick: () => go(r), title: "show on the timeline" } : {}, r.map((v, i) => h("td", { class: numeric[i] ? "num" : null },
      v === null ? "∅" : typeof v === "object" ? JSON.stringify(v) : String(v))))))));
}

/** Where a SQL result row with `ts` (and `producer`) is on the timeline of the trace the query
 *  reads ("<trace>".type): ts is epoch ns (its digits when past 2^53), the page counts from the
 *  trace's first event. */
async function sqlJump(sql, columns) {
  const ti = columns.indexOf("ts"), pi = columns.indexOf("producer");
  const m = sql.match(/"((?:[^"]|"")+)"\s*\./) || sql.match(/\bFROM\s+([A-Za-z_][\w-]*)\s*\./i);
  if (ti < 0 || !m) return null;
  let info;
  try { info = await traceInfo(m[1].replace(/""/g, '"')); } catch { return null; }
  if (info.trace.ts_min_text === null) return null;
  const t0 = BigInt(info.trace.ts_min_text), name = info.trace.name;
  return (r) => {
    if (r[ti] === null || r[ti] === undefined || !/^-?\d+$/.test(String(r[ti]))) return null;
    const at = Number(BigInt(String(r[ti])) - t0), pad = 50_000;
    return hrefFor("timeline", name, { start: at - pad, end: at + pad, producers: pi >= 0 && r[pi] !== null ? [Number(r[pi])] : undefined });
  };
}

// ---------------------------------------------------------------- Analyses

/** Every analysis of the registry (ours and installed plugins'), a form from its parameters,
 *  run over the linked selection (its window parameters are the selection's). */
function pageAnalyses() {
  document.title = `Analyses · ${current.trace} · tracehouse`;
  const list = h("div", { class: "analyses" });
  main.append(h("h1", {}, "Analyses"),
    h("p", { class: "muted" }, "Every analysis of ", h("code", {}, "tracehouse analyze"), ", over the selection; the same answers as the command line."), list);
  fill(list, () => api("/api/ui/analyses", { trace: current.trace }), (d) => {
    for (const a of d.analyses) list.append(analysisForm(a));
  });
}

function analysisForm(a) {
  const out = h("div", { class: "scroll" });
  const fields = h("div", { class: "row" });
  const inputs = [];
  for (const p of a.params) {
    if (p.window || !p.answer || p.name === "trace") continue;
    const id = `an-${a.name}-${p.name}`;
    let input;
    if (p.type === "bool") input = h("input", { type: "checkbox", id });
    else if (p.choices && p.choices.length) input = h("select", { id }, p.default === null ? h("option", { value: "" }, "(default)") : null,
      p.choices.map((c) => h("option", { value: c, selected: c === p.default ? "" : null }, c)));
    else input = h("input", { id, placeholder: p.default !== null && p.default !== undefined ? String(p.default) : (p.required ? "required" : ""), size: 12 });
    inputs.push([p, input]);
    fields.append(h("label", { for: id, title: p.doc + (p.unit ? ` (${p.unit})` : "") }, p.name + (p.unit && p.unit !== "" ? ` [${p.unit}]` : "") + " ", input));
  }
  if (a.traces === "pair") {
    const input = h("input", { id: `an-${a.name}-after`, placeholder: "the other trace", size: 12 });
    inputs.push([{ name: "after", type: "str" }, input]);
    fields.append(h("label", {}, "after ", input));
  }
  const run = () => {
    const params = Object.assign(selParams(), { name: a.name });
    for (const [p, input] of inputs) {
      if (p.type === "bool") { if (input.checked) params[p.name] = "true"; }
      else if (input.value !== "") params[p.name] = input.value;
    }
    fill(out, () => api("/api/ui/analysis", params), (d) => {
      out.append(h("p", { class: "muted" }, `${d.title}: ${fmtInt(d.total)} rows` + (d.rows.length < d.total ? `, ${fmtInt(d.rows.length)} shown` : "")),
        resultTable(d.columns.map((c) => c.unit ? `${c.name} [${c.unit}]` : c.name), d.rows, d.columns.map((c) => c.type)));
    });
  };
  const button = h("button", { class: "primary", onclick: run, disabled: a.form && a.applies !== false ? null : "" }, "Run");
  return h("details", { class: "analysis", "data-analysis": a.name },
    h("summary", {}, h("strong", {}, a.name), " ", a.summary, a.source !== "tracehouse" ? h("span", { class: "muted" }, ` (${a.source})`) : null,
      a.applies === false ? h("span", { class: "muted" }, ` (${a.why || "does not apply"})`) : null),
    fields, h("div", { class: "row" }, button), out);
}

// ---------------------------------------------------------------- Results

function pageResults() {
  document.title = "Results · tracehouse";
  const list = h("div", { class: "scroll" });
  const indexes = h("input", { type: "checkbox", id: "show-idx" });
  main.append(h("h1", {}, "Saved results"),
    h("p", { class: "muted" }, "Analysis results kept in the store (", h("code", {}, "--save"), ", imports of bpftrace/stap aggregates, processed traces)."),
    h("label", {}, indexes, " show derived indexes"), list);
  const load = () => fill(list, () => api("/api/ui/results", { indexes: indexes.checked ? "1" : "" }), (d) => {
    if (!d.results.length) { list.append(h("p", { class: "muted" }, "no results yet: try tracehouse analyze ... --save")); return; }
    list.append(h("table", { "aria-label": "results" }, h("thead", {}, h("tr", {}, ["id", "kind", "name", "tool", "traces", "created"].map((c) => h("th", {}, c)))),
      h("tbody", {}, d.results.map((r) => h("tr", {}, h("td", {}, h("a", { href: "#/result/" + r.id }, String(r.id))), h("td", {}, r.kind),
        h("td", {}, h("a", { href: "#/result/" + r.id }, r.name)), h("td", {}, r.tool), h("td", {}, (r.traces || []).join(", ")), h("td", {}, fmtDate(r.created)))))));
  });
  indexes.addEventListener("change", load);
  load();
}

function pageResult() {
  const id = current.arg;
  document.title = `Result ${id} · tracehouse`;
  const box = h("div");
  main.append(h("h1", {}, `Result ${id}`), box);
  let page = Number(current.qs.get("page") || 0), flameShown = false;
  const load = () => fill(box, () => api("/api/ui/result", { id, page, page_size: 200 }), (d) => {
    box.append(h("dl", { class: "meta panel" }, ...[["name", d.name], ["kind", d.kind], ["tool", d.tool], ["traces", (d.traces || []).join(", ")],
      ["created", fmtDate(d.created)], ["parameters", valueList(d.params)], ["payload", valueList(d.payload)]]
      .filter(([, v]) => v).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
    if (d.view === "processed") {
      box.append(h("p", {}, "A processed trace: ", h("a", { href: "#/trace/" + encodeURIComponent(d.derived_trace) }, d.derived_trace)));
      return;
    }
    if (!d.table) return;
    const tb = d.table;
    const pager = h("div", { class: "pager" }, h("button", { disabled: page === 0, onclick: () => { page--; load(); } }, "◀"),
      h("span", {}, `rows ${fmtInt(tb.page * tb.page_size + 1)}–${fmtInt(tb.page * tb.page_size + tb.rows.length)} of ${fmtInt(tb.total)}`),
      h("button", { disabled: (tb.page + 1) * tb.page_size >= tb.total, onclick: () => { page++; load(); } }, "▶"));
    if (d.view === "flame") {
      // folded stacks: the flame graph of the whole text (zoomed here, from what came), then the text
      const fb = h("div", { class: "flame" });
      box.append(h("h2", {}, "Flame graph"), fb);
      const zoom = (n) => drawFlame(fb, d.flame, n.id, null, d.flame, zoom);
      drawFlame(fb, d.flame, null, null, d.flame, zoom);
      flameShown = true;
    }
    if (d.view === "histogram") box.append(h("h2", {}, "Histogram"), resultHistograms(tb));
    if (d.view === "text" || d.view === "flame" || (flameShown && tb.columns.length === 1 && tb.columns[0] === "line")) {
      // a text result is its lines, once (not also as a one-column table)
      box.append(h("h2", {}, "Text"), pager, h("pre", { class: "result-text" }, tb.rows.map((r) => r[0]).join("\n")));
      return;
    }
    box.append(h("h2", {}, "Table"), pager, resultTable(tb.columns, tb.rows, tb.types));
  });
  load();
}

/** A result's parameters or payload: one line a key, text as written (its line breaks kept,
 *  wrapped in the panel), nested values as indented JSON. */
function valueList(obj) {
  if (obj === null || obj === undefined || (typeof obj === "object" && !Object.keys(obj).length)) return "";
  if (typeof obj !== "object" || Array.isArray(obj)) return h("span", { class: "value" }, typeof obj === "string" ? obj : JSON.stringify(obj));
  return h("dl", { class: "meta values" }, ...Object.entries(obj).flatMap(([k, v]) => [h("dt", {}, k),
    h("dd", { class: "value" }, v === null ? "∅" : typeof v === "object" ? JSON.stringify(v, null, 1) : String(v))]));
}

function resultHistograms(tb) {
  const col = (n) => tb.columns.indexOf(n);
  const ci = col("count"), gi = [col("map"), col("key"), col("group")].filter((i) => i >= 0);
  const lab = col("label") >= 0 ? (r) => r[col("label")]
    : col("lo") >= 0 ? (r) => `[${r[col("lo")] ?? "…"}, ${r[col("hi")] ?? "…"})` : (r) => `[${r[col("low")] ?? "…"}, ${r[col("high")] ?? "…"}]`;
  const groups = new Map();
  for (const r of tb.rows) { const g = gi.map((i) => r[i] ?? "").join(" "); if (!groups.has(g)) groups.set(g, []); groups.get(g).push(r); }
  const out = h("div");
  for (const [g, rows] of groups) {
    const W = 800, rowH = 15, max = Math.max(1, ...rows.map((r) => r[ci]));
    const svg = s("svg", { viewBox: `0 0 ${W} ${rows.length * rowH}`, role: "img", "aria-label": "histogram " + g });
    rows.forEach((r, i) => {
      const w = (r[ci] / max) * (W - 250);
      svg.append(s("g", { transform: `translate(0,${i * rowH})` }, s("text", { x: 0, y: 11, "font-size": 11, "font-family": "monospace" }, lab(r)),
        s("rect", { x: 170, y: 2, width: Math.max(r[ci] ? 1 : 0, w), height: rowH - 4, class: "bar" }), s("text", { x: 174 + w, y: 11, "font-size": 10 }, fmtInt(r[ci]))));
    });
    out.append(h("h3", {}, g || "(all)"), svg);
  }
  return out;
}

// ---------------------------------------------------------------- start

(function start() {
  const m = location.hash.match(/[#&?]token=([^&]+)/);
  if (m) { sessionStorage.setItem("tracehouse-token", decodeURIComponent(m[1])); history.replaceState(null, "", location.pathname + "#/"); }
  route();
})();
