// The timeline's script: zoom (wheel, drag, buttons), compress quiet
// stretches, hover. It moves the SVG's item groups; it fetches nothing.
(function () {
  "use strict";
  const svg = document.getElementById("timeline");
  const S = +svg.dataset.start, E = +svg.dataset.end;
  const G = +svg.dataset.gutter, P = +svg.dataset.plot, CH = +svg.dataset.char;
  const KEEP = 150000; // µs a quiet stretch keeps when compressed (layout.rs QUIET_KEPT_US)
  const quiet = (svg.dataset.quiet || "").split(",").filter(Boolean).map((s) => s.split("-").map(Number));
  const NS = "http://www.w3.org/2000/svg";
  let compress = false;
  let v0 = S, v1 = E; // the view, in (possibly compressed) time

  function warp(t) {
    if (!compress) return t;
    let cut = 0;
    for (const [a, b] of quiet) {
      if (t <= a) break;
      const len = b - a;
      cut += t >= b ? len - KEEP : (t - a) * (1 - KEEP / len);
    }
    return t - cut;
  }
  function unwarp(w) {
    if (!compress) return w;
    let cut = 0;
    for (const [a, b] of quiet) {
      const wa = a - cut, wb = wa + KEEP;
      if (w <= wa) break;
      if (w < wb) return a + (w - wa) * (b - a) / KEEP;
      cut += b - a - KEEP;
    }
    return w + cut;
  }
  const x = (t) => G + (warp(t) - v0) / (v1 - v0) * P;

  // Items grouped by row (same parent and same y), in drawing order.
  const items = [];
  const rows = new Map();
  svg.querySelectorAll("g.it[data-a]").forEach((g) => {
    const m = /translate\(([-\d.]+),([-\d.]+)\)/.exec(g.getAttribute("transform"));
    const it = {
      g, a: +g.dataset.a, b: +g.dataset.b, y: m[2], mark: g.classList.contains("mk"),
      bg: g.classList.contains("bg"), vio: g.classList.contains("vio"),
      rect: g.querySelector("rect"), text: g.querySelector("text"),
    };
    items.push(it);
    if (!it.bg) {
      const key = it.vio ? "vio" : g.parentNode.getAttribute("data-lane") + "/" + it.y;
      if (!rows.has(key)) rows.set(key, []);
      rows.get(key).push(it);
    }
  });
  const clocks = Array.from(svg.querySelectorAll("polyline.clock")).map((p) => ({
    p, t: p.dataset.t.split(" ").map(Number), y: p.getAttribute("points").split(" ").map((s) => s.split(",")[1]),
  }));
  const axis = document.getElementById("axis");
  const bottom = +svg.dataset.bottom;
  const bands = document.createElementNS(NS, "g");
  bands.setAttribute("id", "quietbands");
  axis.after(bands);

  function labels() {
    for (const row of rows.values()) {
      let free = -Infinity;
      row.forEach((it, i) => {
        if (!it.text || it.g.style.display === "none") return;
        const xa = x(it.a), xb = x(it.b);
        const w = it.text.textContent.length * CH;
        let show;
        if (it.vio) {
          // Near the right edge the label goes to the left of its line.
          const left = xa + 8 + w > G + P;
          it.text.setAttribute("x", left ? (-8 - w).toFixed(1) : "8");
          const start = left ? xa - 8 - w : xa + 8;
          show = start >= free;
          if (show) free = start + w + 4;
        } else if (it.mark) {
          const next = row[i + 1] ? x(row[i + 1].a) : Infinity;
          show = xa + 5 >= free && xa + 5 + w + 2 <= next;
          if (show) free = xa + 5 + w + 3;
        } else {
          // Inside the span if it fits, else after it up to the next item of the row.
          const next = row[i + 1] ? x(row[i + 1].a) : G + P;
          const inside = Math.max(xa, G) + 3;
          const after = xb + 3;
          if (inside >= free && inside + w + 2 <= Math.min(xb, G + P)) {
            show = true;
            it.text.setAttribute("x", (inside - xa).toFixed(1));
            free = xb;
          } else {
            show = after >= free && after + w + 2 <= Math.min(next, G + P);
            it.text.setAttribute("x", (after - xa).toFixed(1));
            if (show) free = after + w + 3;
          }
        }
        it.text.classList.toggle("h", !show);
      });
    }
  }

  function ticks() {
    axis.replaceChildren();
    const t0 = unwarp(v0), t1 = unwarp(v1);
    const span = (v1 - v0) / 1000; // ms of drawn time
    let step = 1;
    for (let k = 0; ; k++) {
      const s = [1, 2, 5][k % 3] * Math.pow(10, Math.floor(k / 3));
      if (span / s <= 12) { step = s; break; }
    }
    let free = -Infinity;
    for (let t = Math.ceil(t0 / 1000 / step) * step; t * 1000 <= t1; t += step) {
      if (compress && quiet.some(([a, b]) => t * 1000 > a && t * 1000 < b)) continue;
      const xt = x(t * 1000);
      const label = step >= 1000 ? (t / 1000) + "s" : (t / 1000).toFixed(step >= 100 ? 1 : step >= 10 ? 2 : 3) + "s";
      const line = document.createElementNS(NS, "line");
      line.setAttribute("class", "tick");
      for (const [k, v] of [["x1", xt], ["x2", xt], ["y1", 54], ["y2", bottom]]) line.setAttribute(k, v);
      axis.appendChild(line);
      if (xt - label.length * 3.2 < free) continue;
      free = xt + label.length * 3.2 + 8;
      const text = document.createElementNS(NS, "text");
      text.setAttribute("class", "tick");
      text.setAttribute("x", xt.toFixed(1));
      text.setAttribute("y", 51);
      text.textContent = label;
      axis.appendChild(text);
    }
  }

  function quietBands() {
    bands.replaceChildren();
    if (!compress) return;
    for (const [a, b] of quiet) {
      const xa = x(a), xb = x(b);
      if (xb < G || xa > G + P) continue;
      const r = document.createElementNS(NS, "rect");
      r.setAttribute("class", "quiet");
      for (const [k, v] of [["x", xa], ["y", 54], ["width", Math.max(1, xb - xa)], ["height", bottom - 54]]) r.setAttribute(k, v);
      const title = document.createElementNS(NS, "title");
      title.textContent = ((b - a) / 1e6).toFixed(3) + " s in which nothing changes, compressed";
      r.appendChild(title);
      bands.appendChild(r);
    }
  }

  function draw() {
    for (const it of items) {
      const xa = x(it.a), xb = x(it.b);
      const out = xb < G - 8 || xa > G + P + 8;
      it.g.style.display = out ? "none" : "";
      if (out) continue;
      it.g.setAttribute("transform", "translate(" + xa.toFixed(1) + "," + it.y + ")");
      if (it.rect && !it.mark) it.rect.setAttribute("width", Math.max(1, xb - xa).toFixed(1));
    }
    for (const c of clocks) {
      c.p.setAttribute("points", c.t.map((t, i) => x(t).toFixed(1) + "," + c.y[i]).join(" "));
    }
    labels();
    ticks();
    quietBands();
    document.getElementById("window").textContent =
      "showing " + (unwarp(v0) / 1e6).toFixed(3) + " s to " + (unwarp(v1) / 1e6).toFixed(3) + " s of " + (E / 1e6).toFixed(3) + " s";
  }

  function view(a, b) {
    const lo = warp(S), hi = warp(E);
    const width = Math.max(Math.min(b - a, hi - lo), 1000);
    a = Math.max(lo, Math.min(a, hi - width));
    v0 = a; v1 = a + width;
    draw();
  }
  function whole() { view(warp(S), warp(E)); }
  // Around the violation: up to 10 s, the violation three quarters of the way in.
  function around(t) {
    const w = Math.min(10e6, warp(E) - warp(S));
    view(warp(t) - 0.75 * w, warp(t) + 0.25 * w);
  }

  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect();
    const px = Math.min(Math.max(e.clientX - r.left - G, 0), P) / P;
    const at = v0 + px * (v1 - v0);
    const f = e.deltaY > 0 ? 1.25 : 0.8;
    view(at - px * (v1 - v0) * f, at + (1 - px) * (v1 - v0) * f);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (e) => { drag = { x: e.clientX, v0, v1 }; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dt = (e.clientX - drag.x) / P * (drag.v1 - drag.v0);
    view(drag.v0 - dt, drag.v1 - dt);
  });
  const info = document.getElementById("info");
  const hint = info.textContent;
  svg.addEventListener("mouseover", (e) => {
    const g = e.target.closest("g.it, polyline.clock, rect.quiet");
    const title = g && g.querySelector("title");
    info.textContent = title ? title.textContent : hint;
  });
  document.getElementById("whole").onclick = whole;
  document.getElementById("compress").onchange = (e) => {
    const a = unwarp(v0), b = unwarp(v1);
    compress = e.target.checked;
    view(warp(a), warp(b));
  };
  document.querySelectorAll("[data-at]").forEach((el) => { el.onclick = () => around(+el.dataset.at); });
  const first = items.find((it) => it.vio);
  if (first) around(first.a); else whole();
})();
