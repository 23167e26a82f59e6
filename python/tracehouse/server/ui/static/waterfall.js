/* The Waterfall page (#/waterfall/TRACE): search the OpenTelemetry traces of a store trace of
 * format otlp, and show one as a waterfall, as Jaeger and Tempo do.
 *
 * Owns the page only; it uses app.js's helpers (h, api, fill, main, current, hrefFor, fmtNs,
 * fmtNsExact, fmtEpoch, fmtInt, tickFormat, PALETTE, showError) and registers itself in window.extraPages.
 * The search, the selected trace and span live in the address
 * (#/waterfall/TRACE?service=&name=&attr=&min=&max=&errors=1&sort=&limit=&tid=&span=): a
 * search is bookmarkable and Back returns to it. Every answer is bounded by the server
 * (server/ui/waterfall.py): at most `limit` traces; the tree's rows come a page at a time with
 * the subtrees of collapsed spans left out by the server, so a trace of 100,000 spans is never
 * sent whole. Selecting a span changes the address in place (no new request for the tree).
 * Keys on a row: Enter shows the span, ↑/↓ move between rows, ←/→ collapse or expand.
 */
"use strict";

(function () {
  const wf = { collapsed: new Map(), rows: 5000 };
  // Service colours: the palette without its reds, which mark spans in error.
  const COLORS = PALETTE.filter((c) => !["#e15759", "#d1495b", "#ff9da7"].includes(c));  // per OpenTelemetry trace id: its collapsed span ids
  const KEYS = ["service", "name", "attr", "min", "max", "errors", "sort", "limit", "tid", "span"];

  function params() {
    const q = current.qs, out = {};
    for (const k of KEYS) if (q.get(k)) out[k] = q.get(k);
    return out;
  }
  function href(over = {}) {
    const p = Object.assign(params(), over), q = new URLSearchParams();
    for (const k of KEYS) if (p[k] !== undefined && p[k] !== null && p[k] !== "") q.set(k, p[k]);
    return "#/waterfall/" + encodeURIComponent(current.trace) + (q.toString() ? "?" + q : "");
  }
  const short = (id) => (id || "").slice(0, 8);
  /** A time of the page (ns from the store trace's first event) as a UTC date and time. */
  const wall = (rel) => current.info.trace.ts_min_text ? fmtEpoch((BigInt(current.info.trace.ts_min_text) + BigInt(Math.round(rel))).toString()) : fmtNsExact(rel);
  const kvText = (obj) => Object.entries(obj || {}).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join("\n");

  function searchForm(p, services) {
    const svc = h("select", { name: "service" }, h("option", { value: "" }, "any"),
      services.map((s) => h("option", { value: s, selected: s === p.service }, s)));
    const form = h("form", { class: "search row", role: "search", "aria-label": "trace search" },
      h("label", {}, "service", svc),
      h("label", {}, "span name (% any text)", h("input", { name: "name", value: p.name || "", size: 16 })),
      h("label", {}, "attributes KEY=VALUE …", h("input", { name: "attr", value: p.attr || "", size: 26, placeholder: "http.response.status_code=500" })),
      h("label", {}, "min duration", h("input", { name: "min", value: p.min || "", size: 7, placeholder: "2ms" })),
      h("label", {}, "max duration", h("input", { name: "max", value: p.max || "", size: 7, placeholder: "1s" })),
      h("label", {}, "errors only", h("input", { type: "checkbox", name: "errors", checked: p.errors === "1" })),
      h("label", {}, "sort", h("select", { name: "sort" }, ["slowest", "newest"].map((s) => h("option", { value: s, selected: s === (p.sort || "slowest") }, s)))),
      h("label", {}, "at most", h("select", { name: "limit" }, ["20", "50", "100", "500"].map((n) => h("option", { value: n, selected: n === (p.limit || "50") }, n)))),
      h("button", { type: "submit", class: "primary" }, "Find traces"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const f = new FormData(form), over = {};
      for (const k of ["service", "name", "attr", "min", "max", "sort", "limit"]) over[k] = String(f.get(k) || "").trim();
      over.errors = f.get("errors") ? "1" : "";
      location.hash = href(over);
    });
    return form;
  }

  function searchRequest(p) {
    const r = { trace: current.trace, rel: 1, service: p.service, name: p.name, min_dur: p.min, max_dur: p.max, sort: p.sort, limit: p.limit || 50 };
    if (p.errors === "1") r.errors_only = 1;
    if (p.attr) r.attr = p.attr.split(/\s+/).filter(Boolean);
    return r;
  }

  function results(box, d, p) {
    const note = h("p", { class: "muted" }, `${fmtInt(d.matched)} traces match` + (d.matched > d.traces.length ? `; the ${d.traces.length} ${p.sort === "newest" ? "newest" : "slowest"} shown` : ""));
    const rows = d.traces.map((t) => h("tr", { "data-trace-id": t.trace_id, class: t.trace_id === p.tid ? "selected" : null,
      onclick: () => { location.hash = href({ tid: t.trace_id, span: "" }); } },
      h("td", {}, h("a", { href: href({ tid: t.trace_id, span: "" }) }, `${t.root_service || "?"}: ${t.root_name || "?"}`)),
      h("td", { class: "mono" }, short(t.trace_id)),
      h("td", { class: "num" }, fmtInt(t.spans)),
      h("td", { class: "num" }, t.errors ? h("span", { class: "err", title: `${t.errors} spans in error` }, `⚠ ${t.errors}`) : ""),
      h("td", { class: "num" }, fmtNs(t.dur)),
      h("td", { class: "num", title: `${fmtNsExact(t.start)} from the store trace's first event` }, wall(t.start)),
      h("td", {}, (t.services || []).join(", "))));
    box.append(note, h("div", { class: "scroll wf-results" }, h("table", { "aria-label": "trace results" },
      h("thead", {}, h("tr", {}, ["trace (root)", "trace id", "spans", "errors", "duration", "start", "services"].map((c, i) => h("th", { class: i >= 2 && i <= 5 ? "num" : null }, c)))),
      h("tbody", {}, rows))));
  }

  /** Ticks 1, 2 or 5 × 10^k ns apart, about n of them over [0, dur]. */
  function ticks(dur, n = 6) {
    const raw = Math.max(dur, 1) / n, k = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * k).find((x) => x >= raw);
    const out = [];
    for (let t = 0; t <= dur + 1e-9; t += step) out.push(t);
    return { step, at: out };
  }

  function waterfall(box, d, p, details) {
    if (!d.total) { box.append(h("p", { class: "muted" }, `no spans of trace ${p.tid} in this store trace`)); return; }
    const c = d.columns, dur = Math.max(d.duration, 1), col = new Map(d.services.map((s, i) => [s, COLORS[i % COLORS.length]]));
    const collapsed = wf.collapsed.get(d.trace_id) || new Set();
    const t = ticks(dur), fmt = tickFormat(0, dur, t.step);
    const axis = h("div", { class: "wf-axis", "aria-hidden": "true" }, t.at.map((x) => h("span", { style: `left:${(x / dur) * 100}%` + (x > dur * 0.9 ? ";transform:translateX(-100%)" : "") }, fmt(x))));
    const legend = h("div", { class: "legend" }, d.services.map((s) => h("span", { style: `--c:${col.get(s)}` }, s)));
    const rows = [];
    for (let i = 0; i < d.rows; i++) {
      const id = c.span_id[i], err = c.error[i], kids = c.children[i], closed = collapsed.has(id);
      const left = (c.offset[i] / dur) * 100, width = Math.max((c.dur[i] / dur) * 100, 0.15);
      const tog = kids ? h("button", { class: "tog", "aria-label": (closed ? "expand " : "collapse ") + c.name[i], "aria-expanded": String(!closed),
        onclick: (ev) => { ev.stopPropagation(); toggle(d.trace_id, id); } }, closed ? "▸" : "▾") : h("span", { class: "tog" });
      rows.push(h("div", { class: "wf-row" + (err ? " error" : "") + (id === p.span ? " selected" : ""), role: "row", tabindex: "0",
        "data-span-id": id, "data-depth": c.depth[i], "data-parent": c.parent_span_id[i] || "",
        onclick: () => pick(id, details), onkeydown: (ev) => rowKey(ev, id, details) },
        h("div", { class: "wf-name", role: "cell", style: `padding-left:${c.depth[i] * 14 + 2}px` }, tog,
          h("span", { class: "sw", style: `--c:${col.get(c.service[i])}` }),
          err ? h("span", { class: "err", title: "status error" }, "⚠ ") : "",
          h("span", { class: "svc" }, c.service[i] || ""), " ", c.name[i],
          closed ? h("span", { class: "muted" }, ` (+${fmtInt(kids)} children hidden)`) : ""),
        h("div", { class: "wf-lane", role: "cell" },
          h("div", { class: "wf-bar", style: `left:${left}%;width:${width}%;background:${col.get(c.service[i])}`, title: `${c.name[i]}: ${fmtNs(c.dur[i])} at +${fmtNs(c.offset[i])}` }),
          h("span", { class: "wf-dur", style: left + width > 80 ? `right:${100 - left + 0.5}%` : `left:${left + width + 0.5}%` }, fmtNs(c.dur[i])))));
    }
    box.append(
      h("h2", {}, `Trace ${d.trace_id}`),
      h("p", {}, `${fmtInt(d.total)} spans${collapsedNote(d)}, duration ${fmtNs(d.duration)}, started ${wall(d.start)} · `,
        h("a", { href: hrefFor("timeline", current.trace, { start: d.start, end: d.end }) }, "timeline of this trace"), " · ",
        h("a", { href: hrefFor("calls", current.trace, { start: d.start, end: d.end }) }, "flame graph of this trace"),
        collapsed.size ? [" · ", h("button", { class: "link", onclick: () => { wf.collapsed.delete(d.trace_id); route(); } }, "expand all")] : ""),
      legend,
      h("div", { class: "wf", role: "table", "aria-label": "waterfall", "data-total": d.total },
        h("div", { class: "wf-row wf-head" }, h("div", { class: "wf-name" }, "service · span"), h("div", { class: "wf-lane" }, axis)),
        rows));
    if (d.rows < d.total) {
      box.append(h("p", { class: "muted pager" }, `rows ${fmtInt(d.offset + 1)}–${fmtInt(d.offset + d.rows)} of ${fmtInt(d.total)} `,
        h("button", { onclick: () => { wf.page = Math.max(0, (wf.page || 0) - 1); route(); }, disabled: d.offset === 0 }, "◀ previous rows"),
        h("button", { onclick: () => { wf.page = (wf.page || 0) + 1; route(); }, disabled: d.offset + d.rows >= d.total }, "next rows ▶")));
    }
  }

  /** Keys on a row: Enter shows the span, ↑/↓ move between rows, ←/→ collapse or expand its subtree. */
  function rowKey(ev, id, details) {
    const row = ev.currentTarget;
    if (ev.key === "Enter") pick(id, details);
    else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      const next = ev.key === "ArrowDown" ? row.nextElementSibling : row.previousElementSibling;
      if (next && next.dataset.spanId) { ev.preventDefault(); next.focus(); }
    } else if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
      const tog = row.querySelector("button.tog");
      if (tog && (tog.getAttribute("aria-expanded") === "true") === (ev.key === "ArrowLeft")) { ev.preventDefault(); tog.click(); }
    }
  }

  const collapsedNote = (d) => d.collapsed.length ? ` shown (${d.collapsed.length} collapsed)` : "";

  function toggle(tid, id) {
    const set = wf.collapsed.get(tid) || new Set();
    set.has(id) ? set.delete(id) : set.add(id);
    wf.collapsed.set(tid, set);
    wf.focus = id;  // the row keeps the keyboard's place once redrawn
    route();
  }

  function pick(id, details) {
    history.replaceState(null, "", href({ span: id }));
    current.qs = new URLSearchParams(location.hash.split("?")[1] || "");
    document.querySelectorAll(".wf-row.selected").forEach((r) => r.classList.remove("selected"));
    const row = document.querySelector(`.wf-row[data-span-id="${id}"]`);
    if (row) row.classList.add("selected");
    spanDetails(details, id);
  }

  function spanDetails(box, id) {
    const p = params();
    box.replaceChildren(h("p", { class: "muted" }, "loading span…"));
    fill(box, () => api("/api/ui/otel/span", { trace: current.trace, rel: 1, trace_id: p.tid, span_id: id }), (d) => {
      const s = d.span, dd = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
      const spanLink = (sid, label) => h("button", { class: "link", onclick: () => pick(sid, box) }, label || sid);
      const range = { start: s.ts - Math.max(s.dur * 0.1, 1000), end: s.end_ts + Math.max(s.dur * 0.1, 1000), producers: [s.producer] };
      const table = (label, head, rows) => rows.length ? h("table", { "aria-label": label }, h("thead", {}, h("tr", {}, head.map((x) => h("th", {}, x)))),
        h("tbody", {}, rows)) : h("p", { class: "muted" }, "none");
      const kv = (obj) => Object.entries(obj).map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { class: "value" }, typeof v === "object" ? JSON.stringify(v) : String(v))));
      const attrs = [...Object.entries(d.typed).map(([k, v]) => h("tr", {}, h("td", {}, k, h("span", { class: "muted", title: "a typed column of the span event type" }, " (column)")), h("td", { class: "value" }, String(v)))),
        ...kv(d.attributes)];
      const start = s.ts - (wf.tree ? wf.tree.start : s.ts);
      box.append(h("h2", {}, (s.error ? "⚠ " : "") + s.name),
        h("p", {}, h("a", { href: hrefFor("timeline", current.trace, range) }, "on the timeline"), " · ",
          h("a", { href: hrefFor("calls", current.trace, { start: s.ts, end: s.end_ts, producers: [s.producer] }) }, "calls inside it (flame graph)")),
        h("dl", { class: "meta", "aria-label": "span details" },
          ...dd("service", s.service || ""), ...dd("kind", s.kind || "unspecified"),
          ...dd("status", s.status + (s.status_message ? `: ${s.status_message}` : "")),
          ...dd("span id", h("span", { class: "mono" }, s.span_id)),
          ...dd("parent", s.parent_span_id ? spanLink(s.parent_span_id) : "none (a root span)"),
          ...dd("start", `+${fmtNs(start)} in the trace (${wall(s.ts)})`),
          ...dd("duration", fmtNs(s.dur)), ...dd("self time", fmtNs(s.self_ns)),
          ...dd("children", fmtInt(s.children)), ...dd("scope", s.scope || ""),
          ...dd("producer", d.producers.map((x) => `${x.kind} ${x.name}`).join(" ← "))),
        h("h3", {}, "Attributes"), table("span attributes", ["key", "value"], attrs),
        h("h3", {}, `Events (${d.events.length})`), table("span events", ["at", "name", "attributes"], d.events.map((e) =>
          h("tr", {}, h("td", { class: "num" }, `+${fmtNs(e.ts - s.ts)}`), h("td", {}, e.name), h("td", { class: "value" }, kvText(e.attributes))))),
        h("h3", {}, `Links (${d.links.length})`), table("span links", ["", "trace id", "span id", "attributes"], d.links.map((l) =>
          h("tr", {}, h("td", {}, l.direction === "to" ? "links to" : "linked from"),
            h("td", { class: "mono" }, h("a", { href: href({ tid: l.other_trace_id, span: l.other_span_id }) }, l.other_trace_id)),
            h("td", { class: "mono" }, l.other_span_id), h("td", { class: "value" }, kvText(l.attributes))))),
        h("h3", {}, `Children (${fmtInt(d.children_total)})`), table("span children", ["start", "name", "service", "duration"], d.children.map((k) =>
          h("tr", {}, h("td", { class: "num" }, `+${fmtNs(k.ts - s.ts)}`), h("td", {}, spanLink(k.span_id, (k.error ? "⚠ " : "") + k.name)),
            h("td", {}, k.service || ""), h("td", { class: "num" }, fmtNs(k.dur))))),
        h("h3", {}, "Resource"), h("table", { "aria-label": "resource" }, h("tbody", {}, d.producers.flatMap((x) =>
          [h("tr", {}, h("th", { colspan: 2 }, `${x.kind} ${x.name}`)), ...kv(x.attrs)]))));
    });
  }

  function pageWaterfall() {
    const info = current.info, t = info.trace, p = params();
    document.title = `${t.name} waterfall · tracehouse`;
    main.append(h("h1", {}, `${t.name}: traces`));
    if (t.format !== "otlp") { main.append(h("p", { class: "muted" }, "The waterfall shows OpenTelemetry traces (a trace of format otlp).")); return; }
    if (wf.tid !== p.tid) { wf.tid = p.tid; wf.page = 0; }
    const formBox = h("div"), resBox = h("div"), treeBox = h("div"), details = h("div", { class: "wf-details", "aria-live": "polite" });
    main.append(formBox, resBox, h("div", { class: "wf-grid" }, treeBox, details));
    fill(resBox, () => api("/api/ui/otel/search", searchRequest(p)), (d) => {
      formBox.replaceChildren(searchForm(p, d.services));
      results(resBox, d, p);
    });
    formBox.append(searchForm(p, []));
    if (!p.tid) return;
    const collapsed = [...(wf.collapsed.get(p.tid) || [])];
    fill(treeBox, () => api("/api/ui/otel/tree", { trace: current.trace, rel: 1, trace_id: p.tid, collapsed: collapsed.join(","), offset: (wf.page || 0) * wf.rows, limit: wf.rows }), (d) => {
      wf.tree = d;
      waterfall(treeBox, d, p, details);
      const back = wf.focus && treeBox.querySelector(`.wf-row[data-span-id="${wf.focus}"]`);
      wf.focus = null;
      if (back) back.focus();
      if (p.span) spanDetails(details, p.span);
    });
  }

  window.extraPages = Object.assign(window.extraPages || {}, { waterfall: pageWaterfall });
})();
