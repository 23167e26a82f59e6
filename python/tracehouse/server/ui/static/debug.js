/* The Debug page (#/debug/TRACE): travel back in a recorded program.
 *
 * Owns the page only; it uses app.js's helpers (h, api, main, current, fmtInt, showError) and
 * registers itself in window.extraPages. The session's state (position, the write shown,
 * breakpoints) lives here and goes with every request to POST /api/ui/debug, which runs the
 * commands of `tracehouse debug` and answers the position, the source around the current line
 * (highlighted) and the stack with each frame's variables. Keys: s/b step and back, n/N next and
 * back next, o/O out and back out, c/C continue and back continue.
 */
"use strict";

(function () {
  const dbg = { trace: null, state: null, last: null, log: [] };

  async function send(commands) {
    const body = JSON.stringify({ trace: current.trace, state: dbg.trace === current.trace ? dbg.state : null, commands });
    const r = await api("/api/ui/debug", {}, { method: "POST", body, headers: { "Content-Type": "application/json" } });
    dbg.trace = current.trace;
    dbg.state = r.state;
    dbg.last = r;
    for (const a of r.answers) dbg.log.unshift(a);
    dbg.log = dbg.log.slice(0, 20);
    return r;
  }

  function valueText(v) { return v ? v.text : ""; }

  function sourceBox(src) {
    if (!src.lines || !src.lines.length) return h("p", { class: "muted" }, "no source stored for this position");
    return h("pre", { class: "debug-source", "aria-label": "source" }, ...src.lines.map((l) =>
      h("div", { class: l.current ? "current" : null, "aria-current": l.current ? "true" : null },
        h("span", { class: "muted" }, String(l.line).padStart(5) + " "), l.text)));
  }

  function framesBox(frames) {
    return h("div", { class: "debug-frames" }, ...frames.map((f, i) =>
      h("details", { open: i === 0 ? true : null },
        h("summary", {}, `#${f.depth} ${f.function}`, h("span", { class: "muted" }, ` ${f.file || ""}:${f.line ?? ""}`)),
        h("table", {}, h("tbody", {}, ...Object.entries(f.locals || {}).map(([k, v]) =>
          h("tr", {}, h("td", {}, h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); run(["origin " + k]); },
            title: "where did this value come from?" }, k)), h("td", {}, valueText(v)))))))));
  }

  function answerBox(a) {
    if (a.error) return h("div", { role: "alert" }, `${a.command}: ${a.error}`);
    const bits = [h("code", {}, a.command)];
    if (a.note) bits.push(" ", a.note);
    if (a.write) bits.push(` — wrote ${a.write.name} = ${a.write.value.text}`);
    if (a.writes) {
      bits.push(` — ${fmtInt(a.total)} writes`);
      return h("div", {}, ...bits, h("table", {}, h("tbody", {}, ...a.writes.slice(0, 50).map((w) =>
        h("tr", {}, h("td", {}, "seq " + w.seq), h("td", {}, w.line !== undefined && w.line !== null ? "line " + w.line : ""),
          h("td", {}, w.value.text))))));
    }
    if (a.value && a.name) bits.push(` ${a.name} = ${a.value.text}`);
    if (a.breakpoints && !a.position) bits.push(" breakpoints: " + (a.breakpoints.map((b) => `${b.id}: ${b.spec}`).join(", ") || "none"));
    return h("div", {}, ...bits);
  }

  function render(box, r) {
    const p = r.position;
    const where = p.line !== undefined ? `${p.file}:${p.line} in ${p.function}` : `${p.type} ${JSON.stringify(p.event)}`;
    const controls = h("div", { class: "debug-controls", role: "toolbar", "aria-label": "debugger" },
      ...[["◀ back", "bs"], ["step ▶", "s"], ["◀ back next", "bn"], ["next ▶", "n"], ["◀ back out", "bo"], ["out ▶", "o"],
        ["◀ continue", "bc"], ["continue ▶", "c"]].map(([label, cmd]) =>
        h("button", { onclick: () => run([cmd]), "data-cmd": cmd }, label)));
    const input = h("input", { type: "text", placeholder: "command: origin x | p a.b | history x | b FILE:LINE | b x > 3 | watch x | help",
      "aria-label": "debugger command", size: 60 });
    const form = h("form", { onsubmit: (ev) => { ev.preventDefault(); if (input.value.trim()) run([input.value.trim()]); } },
      input, h("button", { type: "submit" }, "run"));
    const bps = (dbg.state.breakpoints || []).map((b) => h("li", {}, `${b.id}: ${b.kind} ${b.spec} `,
      h("button", { onclick: () => run(["bd " + b.id]), "aria-label": "delete breakpoint " + b.id }, "×")));
    box.replaceChildren(
      h("p", { class: "debug-position" }, h("strong", {}, p.thread), ` seq ${fmtInt(p.seq)} · ${where}`),
      controls, form,
      h("div", { class: "debug-answers", "aria-live": "polite" }, ...dbg.log.slice(0, 6).map(answerBox)),
      h("div", { class: "debug-grid" },
        h("section", {}, h("h3", {}, "Source"), sourceBox(r.source)),
        h("section", {}, h("h3", {}, "Stack"), framesBox(r.frames),
          h("h3", {}, "Breakpoints"), bps.length ? h("ul", {}, ...bps) : h("p", { class: "muted" }, "none"))));
  }

  let box = null;
  async function run(commands) {
    try {
      const r = await send(commands);
      if (box && box.isConnected) render(box, r);
    } catch (e) { showError(e); }
  }

  function keys(ev) {
    if (!box || !box.isConnected || ev.target.tagName === "INPUT") return;
    const map = { s: "s", b: "bs", n: "n", N: "bn", o: "o", O: "bo", c: "c", C: "bc" };
    if (map[ev.key]) { ev.preventDefault(); run([map[ev.key]]); }
  }
  document.addEventListener("keydown", keys);

  function pageDebug() {
    box = h("div", { class: "debug" }, h("p", { class: "muted" }, "Loading…"));
    main.append(h("h1", {}, `${current.trace}: debug`), box);
    if (dbg.trace !== current.trace) { dbg.state = null; dbg.log = []; }
    run([]);
  }

  window.extraPages = Object.assign(window.extraPages || {}, { debug: pageDebug });
})();
