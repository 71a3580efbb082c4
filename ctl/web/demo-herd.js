// demo-herd.js - the herd simulator of the first article in the
// demonstration (demo.js): N clients update one row under optimistic
// concurrency and retry with a backoff strategy; the server (the tool
// "herd", ctl/web_demo_tools.c) runs outbox-herd for one run and the page
// draws its numbers and the histogram of when the write requests arrived.
// Each finished run is kept in a table, to compare strategies.
"use strict";

(function () {
  var D = window.OutboxDemo = window.OutboxDemo || { parts: {} };
  var V = window.OutboxView;
  var SVGNS = "http://www.w3.org/2000/svg";
  var STRATEGIES = [
    ["none", "No backoff (retry at once)"], ["expo", "Exponential, no jitter"],
    ["expo-10pct", "Exponential x [0.9, 1.1) (Codex)"], ["equal", "Equal Jitter"],
    ["full", "Full Jitter"], ["decorrelated", "Decorrelated Jitter"]
  ];
  var W = 600, H = 170, PAD = 4;
  var kept = {}; /* the runs in #herd-runs, by command */

  function input(id, attrs) {
    var e = V.el("input", Object.assign({ "id": id }, attrs));
    return e;
  }

  function drawHistogram(h) {
    var svg = V.$("#herd-hist");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    if (!h || !h.counts || !h.counts.length) return;
    var max = Math.max.apply(null, h.counts.concat([1]));
    var bw = W / h.counts.length;
    h.counts.forEach(function (c, i) {
      var r = document.createElementNS(SVGNS, "rect");
      var bh = (c / max) * (H - 2 * PAD);
      r.setAttribute("x", (i * bw + 0.5).toFixed(1));
      r.setAttribute("y", (H - PAD - bh).toFixed(1));
      r.setAttribute("width", Math.max(bw - 1, 0.5).toFixed(1));
      r.setAttribute("height", bh.toFixed(1));
      r.setAttribute("data-bin", String(i));
      r.setAttribute("data-count", String(c));
      var t = document.createElementNS(SVGNS, "title");
      t.textContent = c + " requests in [" + i * h.bin_ms + ", " + (i + 1) * h.bin_ms + ") ms";
      r.appendChild(t);
      svg.appendChild(r);
    });
    V.$('#herd [data-field="axis-end"]').textContent = (h.counts.length * h.bin_ms) + " ms";
    V.$('#herd [data-field="busiest"]').textContent = "the highest bar: " + max +
      " requests in " + h.bin_ms + " ms";
  }

  D.parts.herd = {
    build: function (box) {
      box.appendChild(V.el("h3", null, "The herd simulator: how long to wait before a retry"));
      box.appendChild(V.el("p", { "class": "muted" }, "N clients each update one row once " +
        "under optimistic concurrency; a write with a stale version fails and that client " +
        "backs off, then reads again. One run of outbox-herd (network delay |N(10, 2)| ms, " +
        "base 5 ms, cap 2 s): its write requests, the time until the last client is done, " +
        "and when the requests arrived. Without jitter the retries arrive in clumps."));
      var form = V.el("p", { "class": "controls" });
      var sel = V.el("select", { "id": "herd-strategy" });
      STRATEGIES.forEach(function (s) {
        var o = V.el("option", { "value": s[0] }, s[1]);
        if (s[0] === "full") o.selected = true;
        sel.appendChild(o);
      });
      var lab = V.el("label", null, "strategy ");
      lab.appendChild(sel);
      form.appendChild(lab);
      lab = V.el("label", null, " clients ");
      lab.appendChild(input("herd-clients", { "type": "number", "min": "1", "max": "1000", "value": "100" }));
      form.appendChild(lab);
      lab = V.el("label", null, " seed ");
      lab.appendChild(input("herd-seed", { "type": "number", "min": "0", "value": "1" }));
      form.appendChild(lab);
      var b = V.el("button", { "type": "button", "data-action": "run-herd" }, "simulate");
      b.addEventListener("click", function () {
        D.post("/api/demo/tool/herd", {
          strategy: V.$("#herd-strategy").value,
          clients: Number(V.$("#herd-clients").value),
          seed: Number(V.$("#herd-seed").value)
        }, "the herd simulator");
      });
      form.appendChild(b);
      form.appendChild(V.el("span", { "data-field": "status", "class": "status" }, ""));
      box.appendChild(form);
      var out = V.el("p", { "class": "facts" });
      [["calls", "write requests"], ["ms", "done after (ms)"], ["bin_ms", "one bar (ms)"]].forEach(function (f) {
        out.appendChild(V.el("span", null, f[1] + ": "));
        out.appendChild(V.el("b", { "data-field": f[0] }, "-"));
        out.appendChild(V.el("span", null, "  "));
      });
      box.appendChild(out);
      var hb = V.el("div", { "class": "hist-box" });
      var svg = document.createElementNS(SVGNS, "svg");
      svg.setAttribute("id", "herd-hist");
      svg.setAttribute("viewBox", "0 0 " + W + " " + H);
      svg.setAttribute("preserveAspectRatio", "none");
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", "write requests arriving over time");
      hb.appendChild(svg);
      box.appendChild(hb);
      var axis = V.el("p", { "class": "axis" });
      axis.appendChild(V.el("span", null, "0 ms"));
      axis.appendChild(V.el("span", { "data-field": "busiest", "class": "muted" }, ""));
      axis.appendChild(V.el("span", { "data-field": "axis-end" }, ""));
      box.appendChild(axis);
      box.appendChild(V.el("p", { "class": "muted", "data-field": "summary" }, ""));
      box.appendChild(V.el("p", null)).appendChild(V.el("code", { "data-field": "command" }, ""));
      var t = V.el("table", { "id": "herd-runs" });
      var hr = V.el("tr");
      ["strategy", "clients", "seed", "write requests", "done after (ms)"].forEach(function (h) {
        hr.appendChild(V.el("th", null, h));
      });
      t.appendChild(V.el("thead")).appendChild(hr);
      t.appendChild(V.el("tbody"));
      box.appendChild(t);
    },

    draw: function (state, box) {
      var tool = (state.tools || {}).herd;
      if (!tool) return;
      box.querySelector('[data-field="status"]').textContent = tool.status === "idle" ? "" : tool.status;
      var r = tool.result || {};
      box.querySelector('[data-field="summary"]').textContent = r.summary || "";
      box.querySelector('[data-field="command"]').textContent = r.command || "";
      var cell = r.herd && r.herd.strategies && r.herd.strategies[0] &&
        r.herd.strategies[0].cells && r.herd.strategies[0].cells[0];
      var h = cell && cell.histogram;
      if (tool.status !== "done" || !h) return;
      var shown = box.querySelector('[data-field="calls"]');
      if (shown.getAttribute("data-command") === r.command + "#" + h.calls) return;
      shown.setAttribute("data-command", r.command + "#" + h.calls);
      shown.textContent = String(h.calls);
      box.querySelector('[data-field="ms"]').textContent = h.ms.toFixed(0);
      box.querySelector('[data-field="bin_ms"]').textContent = String(h.bin_ms);
      drawHistogram(h);
      if (!kept[r.command]) {
        kept[r.command] = true;
        var p = tool.params || {};
        var tr = V.el("tr", { "data-strategy": p.strategy });
        [r.herd.strategies[0].label, p.clients, p.seed, h.calls, h.ms.toFixed(0)].forEach(function (v) {
          tr.appendChild(V.el("td", null, String(v)));
        });
        box.querySelector("#herd-runs tbody").appendChild(tr);
      }
    }
  };
})();
