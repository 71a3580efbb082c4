// demo-stepper.js - the idempotency stepper of the first article in the
// demonstration (demo.js): pick a fault, a server implementation and a key
// source (any of 5 x 3 x 4); the tool "cell" (ctl/web_demo_tools.c) plays
// it with `outbox-producer matrix --cell ... --events` against a real
// server and PostgreSQL, recording every request with the rows right after
// it, and the page steps through them one at a time. Below it the
// article's 25 combinations at once (the tool "matrix"), cell by cell next
// to the article's table.
"use strict";

(function () {
  var D = window.OutboxDemo = window.OutboxDemo || { parts: {} };
  var V = window.OutboxView;
  var FAULTS = [
    ["lost-response", "the response is lost, the harness retries"],
    ["crash-mid-request", "the server crashes mid-request"],
    ["concurrent-dup", "the same call runs twice at once"],
    ["new-tool-call-id", "the model calls again with a new tool_use id"],
    ["reworded-title", "the model calls again with a reworded title"]
  ];
  var SERVERS = [["none", "naive (no key handling)"], ["split", "key_split (the report, then the key: two transactions)"],
    ["atomic", "key_atomic (the key claimed, then report and key together)"]];
  var KEYS = [["none", "no key"], ["per_attempt", "a new UUID per attempt"],
    ["tool_call", "run_id:tool_use_id"], ["business", "hash of the content"]];
  /* The article's table (week 5, the fault matrix): rows server / keys. */
  var ROWS = [["none", "none", "naive / none"], ["atomic", "per_attempt", "key_atomic / per_attempt"],
    ["split", "tool_call", "key_split / tool_call"], ["atomic", "tool_call", "key_atomic / tool_call"],
    ["atomic", "business", "key_atomic / business"]];
  var ARTICLE = [[2, 2, 2, 2, 2], [2, 1, 2, 2, 2], [1, 2, 2, 2, 2], [1, 1, 1, 2, 2], [1, 1, 1, 1, 2]];
  D.article = { faults: FAULTS, rows: ROWS, table: ARTICLE };

  var events = [];   /* the played cell's events */
  var at = 0;        /* how many are shown */
  var played = "";   /* the stamp of the events held */

  function select(id, options, chosen) {
    var s = V.el("select", { "id": id });
    options.forEach(function (o) {
      var e = V.el("option", { "value": o[0] }, o[0] + ": " + o[1]);
      if (o[0] === chosen) e.selected = true;
      s.appendChild(e);
    });
    return s;
  }

  function table(id, heads) {
    var t = V.el("table", { "id": id, "class": "rows" });
    var tr = V.el("tr");
    heads.forEach(function (h) { tr.appendChild(V.el("th", null, h)); });
    t.appendChild(V.el("thead")).appendChild(tr);
    t.appendChild(V.el("tbody"));
    return t;
  }

  function fill(id, rows, fields) {
    var tb = V.$("#" + id + " tbody");
    while (tb.firstChild) tb.removeChild(tb.firstChild);
    rows.forEach(function (r) {
      var tr = V.el("tr");
      fields.forEach(function (f) { tr.appendChild(V.el("td", { "data-field": f }, V.show(r[f]))); });
      tb.appendChild(tr);
    });
  }

  // One event in words.
  function describe(e) {
    switch (e.event) {
    case "cell": return "fault " + e.fault + ", server " + e.server + ", key source " + e.keys;
    case "server": return "the server " + e.what + (e.port ? " (port " + e.port + ")" : "");
    case "call": return "call " + e.call + " (" + e.tool_use_id + ", \"" + e.title + "\"): " + e.why;
    case "attempt":
      return "call " + e.call + ", attempt " + e.attempt + ": POST /v1/reports, Idempotency-Key " +
        (e.key === null ? "(none)" : e.key) + " -> " +
        (e.outcome === "answered" ? e.status + (e.replayed ? " (replayed from the stored response)" : "")
          : e.outcome === "lost" ? "no response (" + (e.why || "lost") + ")"
          : "not sent (" + (e.why || "") + ")");
    case "result":
      return e.reports + " report" + (e.reports === 1 ? "" : "s") + " in app.bug_reports" +
        (e.article === null ? " (not a row of the article's table)" : " (the article: " + e.article + ")");
    default: return e.event;
    }
  }

  function showStep(box) {
    box.querySelector('[data-field="position"]').textContent = at + " / " + events.length;
    var ol = box.querySelector("#cell-log");
    while (ol.firstChild) ol.removeChild(ol.firstChild);
    var rows = null;
    events.slice(0, at).forEach(function (e, i) {
      var li = V.el("li", { "data-seq": String(e.seq || 0), "data-event": e.event }, describe(e));
      if (i === at - 1) li.className = "current";
      ol.appendChild(li);
      if (e.event === "attempt") rows = e;
    });
    var cur = at > 0 ? events[at - 1] : null;
    box.querySelector('[data-field="current"]').textContent = cur ? describe(cur) : "";
    box.querySelector('[data-field="rows-after"]').textContent = rows
      ? "The rows right after call " + rows.call + "'s attempt " + rows.attempt + ":" : "";
    fill("cell-reports", rows ? rows.reports : [], ["id", "title", "idempotency_key"]);
    fill("cell-keys", rows ? rows.keys : [], ["key", "state", "fence", "response_status"]);
    var res = events.slice(0, at).filter(function (e) { return e.event === "result"; })[0];
    box.querySelector('[data-field="reports"]').textContent = res ? String(res.reports) : "-";
    box.querySelector('[data-field="article"]').textContent =
      res ? (res.article === null ? "not in its table" : String(res.article)) : "-";
  }

  function stepper(box) {
    box.appendChild(V.el("h3", null, "The idempotency stepper: is it safe to send again?"));
    box.appendChild(V.el("p", { "class": "muted" }, "Pick a fault, a way to write the server " +
      "and where the key comes from. A real server of its own (outbox-producer serve) and the " +
      "real client play it against PostgreSQL; then step through every request and the " +
      "rows of app.bug_reports and app.idempotency_keys right after it."));
    var form = V.el("p", { "class": "controls" });
    [["fault ", select("cell-fault", FAULTS, "lost-response")],
     [" server ", select("cell-server", SERVERS, "atomic")],
     [" key source ", select("cell-keysource", KEYS, "tool_call")]].forEach(function (x) {
      var l = V.el("label", null, x[0]);
      l.appendChild(x[1]);
      form.appendChild(l);
    });
    var play = V.el("button", { "type": "button", "data-action": "run-cell" }, "play");
    play.addEventListener("click", function () {
      D.post("/api/demo/tool/cell", { fault: V.$("#cell-fault").value,
        server: V.$("#cell-server").value, keys: V.$("#cell-keysource").value }, "the stepper");
    });
    form.appendChild(play);
    form.appendChild(V.el("span", { "data-field": "status", "class": "status" }, ""));
    box.appendChild(form);
    var nav = V.el("p", { "class": "controls" });
    [["step-first", "|<"], ["step-prev", "< back"], ["step-next", "step >"], ["step-all", "all >|"]].forEach(function (b) {
      var e = V.el("button", { "type": "button", "data-action": b[0] }, b[1]);
      e.addEventListener("click", function () {
        if (b[0] === "step-first") at = Math.min(1, events.length);
        if (b[0] === "step-prev") at = Math.max(Math.min(1, events.length), at - 1);
        if (b[0] === "step-next") at = Math.min(events.length, at + 1);
        if (b[0] === "step-all") at = events.length;
        showStep(box);
      });
      nav.appendChild(e);
    });
    nav.appendChild(V.el("span", { "data-field": "position", "class": "status" }, "0 / 0"));
    box.appendChild(nav);
    box.appendChild(V.el("p", { "data-field": "current", "class": "current" }, ""));
    box.appendChild(V.el("p", { "data-field": "rows-after", "class": "muted" }, ""));
    var grid = V.el("div", { "class": "rows-grid" });
    grid.appendChild(table("cell-reports", ["app.bug_reports id", "title", "idempotency_key"]));
    grid.appendChild(table("cell-keys", ["app.idempotency_keys key", "state", "fence", "response"]));
    box.appendChild(grid);
    var res = V.el("p", { "class": "facts" });
    res.appendChild(V.el("span", null, "reports: "));
    res.appendChild(V.el("b", { "data-field": "reports" }, "-"));
    res.appendChild(V.el("span", null, "  the article: "));
    res.appendChild(V.el("b", { "data-field": "article" }, "-"));
    box.appendChild(res);
    box.appendChild(V.el("ol", { "id": "cell-log", "class": "events" }));
    box.appendChild(V.el("p")).appendChild(V.el("code", { "data-field": "command" }, ""));
  }

  function matrix(box) {
    box.appendChild(V.el("h3", null, "All 25 combinations of the article, at once"));
    box.appendChild(V.el("p", { "class": "muted" }, "Each cell is its own server and client " +
      "(outbox-producer matrix); the number is the reports it left in app.bug_reports " +
      "(1 is right), next to the article's."));
    var p = V.el("p", { "class": "controls" });
    var b = V.el("button", { "type": "button", "data-action": "run-matrix" }, "run all 25");
    b.addEventListener("click", function () { D.post("/api/demo/tool/matrix", {}, "the 25 combinations"); });
    p.appendChild(b);
    p.appendChild(V.el("span", { "data-field": "status", "class": "status" }, ""));
    p.appendChild(V.el("span", { "data-field": "equal" }, ""));
    box.appendChild(p);
    var t = V.el("table", { "id": "matrix25" });
    var hr = V.el("tr");
    hr.appendChild(V.el("th", null, "server / key source"));
    FAULTS.forEach(function (f) { hr.appendChild(V.el("th", null, f[0])); });
    t.appendChild(V.el("thead")).appendChild(hr);
    var tb = V.el("tbody");
    ROWS.forEach(function (r, i) {
      var tr = V.el("tr", { "data-server": r[0], "data-keys": r[1] });
      tr.appendChild(V.el("th", null, r[2]));
      FAULTS.forEach(function (f, j) {
        var td = V.el("td", { "data-fault": f[0], "data-article": String(ARTICLE[i][j]) });
        td.appendChild(V.el("b", { "data-field": "got" }, "."));
        td.appendChild(V.el("span", { "class": "article" }, " article " + ARTICLE[i][j]));
        tr.appendChild(td);
      });
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    box.appendChild(t);
  }

  D.parts.stepper = {
    build: function (box) {
      var a = V.el("div", { "id": "cell" });
      stepper(a);
      box.appendChild(a);
      var m = V.el("div", { "id": "matrix" });
      matrix(m);
      box.appendChild(m);
    },

    draw: function (state, box) {
      var tools = state.tools || {};
      var cell = tools.cell, mx = tools.matrix;
      if (cell) {
        var cb = box.querySelector("#cell");
        cb.querySelector('[data-field="status"]').textContent = cell.status === "idle" ? "" :
          cell.status + (cell.result && cell.result.summary && cell.status !== "running"
            ? ": " + cell.result.summary : "");
        var r = cell.result || {};
        cb.querySelector('[data-field="command"]').textContent = r.command || "";
        var stamp = (r.command || "") + "#" + (r.events ? r.events.length : 0);
        if (cell.status === "done" && stamp !== played) {
          played = stamp;
          events = (r.events || []).slice();
          at = Math.min(1, events.length);
          showStep(cb);
        } else if (cell.status === "running" && played !== "running") {
          played = "running";
          events = [];
          at = 0;
          showStep(cb);
        }
      }
      if (mx) {
        var mb = box.querySelector("#matrix");
        mb.querySelector('[data-field="status"]').textContent = mx.status === "idle" ? "" : mx.status + " ";
        var res = mx.result || {};
        var cells = res.cells || [];
        mb.querySelectorAll("#matrix25 tbody tr").forEach(function (tr) {
          tr.querySelectorAll("td").forEach(function (td) {
            var c = cells.filter(function (x) {
              return x.server === tr.getAttribute("data-server") && x.keys === tr.getAttribute("data-keys") &&
                x.fault === td.getAttribute("data-fault");
            })[0];
            var got = td.querySelector('[data-field="got"]');
            got.textContent = c ? String(c.reports) : mx.status === "running" ? "." : "-";
            td.className = !c ? "" : String(c.reports) === td.getAttribute("data-article") ? "same" : "differs";
            td.classList.toggle("one", !!c && c.reports === 1);
          });
        });
        var f = res.facts || {};
        mb.querySelector('[data-field="equal"]').textContent = f.cells
          ? f.equal + " of " + f.cells + " cells as in the article's table" : "";
      }
    }
  };
})();
