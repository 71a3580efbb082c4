// app.js - the page of `outboxctl web` (docs/web.md): polls /api/overview
// (the server's one shared snapshot) once a second and draws the
// operator's tables; requeues dead letters with the token typed into
// #token. The demonstration (demo.js and its parts) plugs in through
// window.OutboxView: it is polled before each snapshot and sees each one.
// Every value from the server goes in with textContent / createElement,
// never as markup.
"use strict";

(function () {
  var POLL_MS = 1000;
  var refreshes = 0;

  function $(sel) { return document.querySelector(sel); }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function show(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  function notice(text, isError) {
    var n = $("#notice");
    n.textContent = text;
    n.className = isError ? "error" : "";
  }

  function headers() {
    var h = { "Accept": "application/json" };
    var t = $("#token").value;
    if (t) h["Authorization"] = "Bearer " + t;
    return h;
  }

  function fillBody(table, rows) {
    var tbody = $(table + " tbody");
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    rows.forEach(function (r) { tbody.appendChild(r); });
  }

  function cellRow(attrs, fields, obj) {
    var tr = el("tr", attrs);
    fields.forEach(function (f) { tr.appendChild(el("td", { "data-field": f }, show(obj[f]))); });
    return tr;
  }

  function drawTopics(topics) {
    var f = ["pending", "inflight", "delivered", "dead", "oldest_age_s"];
    fillBody("#topics", topics.map(function (t) {
      var tr = el("tr", { "data-topic": t.topic });
      tr.appendChild(el("th", null, t.topic));
      f.forEach(function (k) { tr.appendChild(el("td", { "data-field": k }, show(t[k]))); });
      return tr;
    }));
  }

  function drawMessages(msgs, visible) {
    var hide = $("#hide-payloads").checked;
    var f = ["id", "key", "status", "attempts", "ordering_key", "ordering_seq", "lease_owner",
      "fence", "lease_left_ms"];
    fillBody("#messages", msgs.map(function (m) {
      var tr = cellRow({ "data-id": String(m.id) }, f, m);
      var p = hide ? "(hidden)" : !visible ? "(needs the token)" : show(m.payload);
      tr.appendChild(el("td", { "data-field": "payload" }, p));
      if (V.highlighted(m)) tr.className = "hl";
      return tr;
    }));
  }

  function requeue(id) {
    var t = $("#token").value;
    if (!t) { notice("requeue needs the token: type it into the token field", true); return; }
    fetch("/api/dead/requeue", {
      method: "POST", headers: Object.assign(headers(), { "Content-Type": "application/json" }),
      body: JSON.stringify({ ids: [id] })
    }).then(function (r) {
      return r.json().then(function (j) { return { status: r.status, body: j }; });
    }).then(function (x) {
      if (x.status === 200) notice("requeued " + x.body.requeued.join(", "), false);
      else if (x.body.refused && x.body.refused.length)
        notice("refused: " + x.body.refused.map(function (f) { return f.reason; }).join("; "), true);
      else notice("requeue failed (" + x.status + "): " + (x.body.error || ""), true);
    }).catch(function (e) { notice("requeue failed: " + e, true); });
  }

  function drawDead(dead) {
    var f = ["id", "topic", "key", "attempts", "error", "dead_at"];
    fillBody("#dead", dead.map(function (d) {
      var tr = cellRow({ "data-id": String(d.id) }, f, d);
      var td = el("td");
      var b = el("button", { "data-action": "requeue", "type": "button" }, "requeue");
      if (!d.requeueable) {
        b.title = "created longer ago than the consumer's dedup retention";
        b.textContent = "requeue (too old)";
      }
      b.addEventListener("click", function () { requeue(d.id); });
      td.appendChild(b);
      tr.appendChild(td);
      return tr;
    }));
  }

  function drawBlocked(keys) {
    fillBody("#blocked", keys.map(function (k) {
      return cellRow({ "data-topic": k.topic }, ["topic", "ordering_key", "head_id"], k);
    }));
  }

  function drawConsumer(c) {
    ["applied", "duplicates", "key_reuse_rejects"].forEach(function (k) {
      $('#consumer [data-field="' + k + '"]').textContent = c ? show(c[k]) : "-";
    });
    fillBody("#dedup", (c && c.dedup ? c.dedup : []).map(function (d) {
      return cellRow(null, ["topic", "key", "created_at"], d);
    }));
  }

  var SVGNS = "http://www.w3.org/2000/svg";
  function drawChart(series) {
    var svg = $("#chart");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    if (!series || series.length < 2) { $("#chart-scale").textContent = ""; return; }
    var W = 600, H = 160, t0 = series[0].t, t1 = series[series.length - 1].t || t0 + 1;
    var maxRate = 1, maxLag = 1;
    series.forEach(function (p) {
      maxRate = Math.max(maxRate, p.delivered_per_s);
      maxLag = Math.max(maxLag, p.lag_s);
    });
    function line(cls, key, max) {
      var pts = series.map(function (p) {
        var x = t1 === t0 ? 0 : (p.t - t0) / (t1 - t0) * W;
        var y = H - 4 - (p[key] / max) * (H - 12);
        return x.toFixed(1) + "," + y.toFixed(1);
      }).join(" ");
      var pl = document.createElementNS(SVGNS, "polyline");
      pl.setAttribute("class", cls);
      pl.setAttribute("points", pts);
      svg.appendChild(pl);
    }
    line("rate", "delivered_per_s", maxRate);
    line("lag", "lag_s", maxLag);
    $("#chart-scale").textContent = "top: " + maxRate.toFixed(1) + " delivered/s, " +
      maxLag.toFixed(1) + " s lag";
  }

  // ---- the loop -----------------------------------------------------------
  var last = null;
  function apply(s) {
    last = s;
    $("#generated").textContent = "snapshot " + s.generated_at;
    drawTopics(s.topics || []);
    drawMessages(s.messages || [], s.payloads_visible);
    drawDead(s.dead || []);
    drawBlocked(s.blocked_keys || []);
    drawConsumer(s.consumer);
    drawChart(s.series);
    refreshes++;
    document.body.setAttribute("data-refreshes", String(refreshes));
  }

  function tick() {
    V.beforeSnapshot().then(function () {
      return fetch("/api/overview", { headers: headers() });
    }).then(function (r) {
      if (r.status !== 200) throw new Error("overview: " + r.status);
      return r.json();
    }).then(function (s) {
      apply(s);
      V.onSnapshot(s);
      if (s.poll_ms) POLL_MS = Math.max(250, s.poll_ms);
    }).catch(function (e) {
      notice(String(e.message || e), true);
    }).then(function () { setTimeout(tick, POLL_MS); });
  }

  // What the demonstration uses, and the hooks it sets (all no-ops
  // without it): start() once before the first snapshot, beforeSnapshot()
  // before each, onSnapshot(s) after each is drawn, highlighted(message).
  var V = window.OutboxView = {
    $: $, el: el, show: show, notice: notice, headers: headers,
    start: function () { return Promise.resolve(); },
    beforeSnapshot: function () { return Promise.resolve(); },
    onSnapshot: function () {},
    highlighted: function () { return false; },
    redrawMessages: function () { if (last) drawMessages(last.messages || [], last.payloads_visible); }
  };

  // scripts/demo.sh --web prints the page's address with the token in its
  // fragment (#token=...), which never reaches the server: it goes into
  // #token and out of the address bar.
  function tokenFromFragment() {
    var m = /^#token=([A-Za-z0-9._~-]{16,256})$/.exec(window.location.hash);
    if (!m) return;
    $("#token").value = m[1];
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }

  document.addEventListener("DOMContentLoaded", function () {
    tokenFromFragment();
    $("#hide-payloads").addEventListener("change", V.redrawMessages);
    V.start().then(tick);
  });
})();
