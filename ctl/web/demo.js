// demo.js - the demonstration of `outboxctl web --demo` (docs/web.md, "The
// demonstration"): when /api/demo answers 200 it leads the page (#demo in
// #demo-slot, above the operator's tables): the picture of the pipeline
// (demo-pipeline.js), the guided steps, the herd simulator
// (demo-herd.js), the idempotency stepper with the article's 25
// combinations (demo-stepper.js) and the graded exercises
// (demo-exercises.js). It polls /api/demo before each snapshot and hands
// the state to each part; parts start jobs through post(). Values from the
// server go in with textContent / createElement only.
"use strict";

(function () {
  var V = window.OutboxView;
  var D = window.OutboxDemo = window.OutboxDemo || { parts: {} };
  var on = false;
  var lastStep = 0; /* the step last started here: only its rows are highlighted */
  var highlight = { keys: {}, ids: {} };
  var order = ["pipeline", "guided", "herd", "stepper", "exercises"];

  // POST path with the token; body: an object sent as JSON, or null.
  // Resolves to true when the job started (202); says why in #notice.
  D.post = function (path, body, what) {
    var t = V.$("#token").value;
    var h = V.headers();
    if (body) h["Content-Type"] = "application/json";
    return fetch(path, { method: "POST", headers: h, body: body ? JSON.stringify(body) : null })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (j) {
          if (r.status === 202) { V.notice(what + " started", false); return true; }
          if (r.status === 409) V.notice("a step or tool is running: wait for it to end", true);
          else if (r.status === 401)
            V.notice(what + " needs the token (scripts/demo.sh --web prints it)" +
              (t ? ": this one is wrong" : ""), true);
          else V.notice(what + ": " + r.status + " " + (j.error || ""), true);
          return false;
        });
      }).catch(function (e) { V.notice(what + ": " + e, true); return false; });
  };

  // ---- the guided steps --------------------------------------------------
  D.parts.guided = {
    build: function (box) {
      box.appendChild(V.el("h3", null, "Guided steps: faults on the real processes"));
      box.appendChild(V.el("p", { "class": "muted" }, "Each step arms a fault in the running " +
        "producer, relay or consumer, or switches a safety off, and shows what it did in " +
        "the picture above and in the tables below."));
      box.appendChild(V.el("ol"));
    },
    draw: function (state, box) {
      var ol = box.querySelector("ol");
      while (ol.firstChild) ol.removeChild(ol.firstChild);
      highlight = { keys: {}, ids: {} };
      /* the rows of one step, not of every step so far: the one last
       * started from this page, else the highest one with a result */
      var shown = lastStep;
      if (!shown) (state.steps || []).forEach(function (s) { if (s.result) shown = s.n; });
      (state.steps || []).forEach(function (s) {
        var li = V.el("li", { "data-step": String(s.n) });
        li.appendChild(V.el("b", null, s.title));
        var b = V.el("button", { "data-action": "run-step", "type": "button" }, "run");
        b.addEventListener("click", function () {
          D.post("/api/demo/step/" + s.n, null, "step " + s.n).then(function (ok) {
            if (ok) lastStep = s.n;
          });
        });
        li.appendChild(b);
        li.appendChild(V.el("span", { "data-field": "status" }, s.status));
        li.appendChild(V.el("p", { "class": "explain" }, s.explain));
        var r = s.result || {};
        li.appendChild(V.el("p", { "data-field": "summary" }, r.summary || ""));
        var facts = V.el("p", { "class": "facts" });
        Object.keys(r.facts || {}).forEach(function (k) {
          facts.appendChild(V.el("span", null, k + ": "));
          facts.appendChild(V.el("b", { "data-fact": k }, V.show(r.facts[k])));
          facts.appendChild(V.el("span", null, " "));
        });
        li.appendChild(facts);
        var h = s.n === shown ? r.highlight || {} : {};
        (h.keys || []).forEach(function (k) { highlight.keys[k] = true; });
        (h.ids || []).forEach(function (i) { highlight.ids[String(i)] = true; });
        ol.appendChild(li);
      });
    }
  };

  // ---- the frame -----------------------------------------------------------
  function build() {
    var box = V.el("section", { "id": "demo" });
    box.appendChild(V.el("h2", { "class": "part" }, "The demonstration: one side effect, once"));
    box.appendChild(V.el("p", { "class": "lede" }, "An agent's tool call becomes a report " +
      "and an outbox record in one transaction; relay workers claim records with a lease " +
      "and a fencing token and deliver them with the idempotency key; the consumer " +
      "records the key and applies the effect in one transaction. Everything below runs " +
      "for real: the processes of scripts/demo.sh --web, and the programs outbox-herd " +
      "and outbox-producer matrix."));
    order.forEach(function (name) {
      var part = D.parts[name];
      if (!part) return;
      var sec = V.el("section", { "id": name, "class": "demo-part" });
      part.build(sec);
      box.appendChild(sec);
    });
    V.$("#demo-slot").appendChild(box);
  }

  function draw(state) {
    order.forEach(function (name) {
      var part = D.parts[name];
      if (part && part.draw) part.draw(state, V.$("#" + name));
    });
  }

  function poll() {
    return fetch("/api/demo", { headers: V.headers() }).then(function (r) {
      if (r.status !== 200) return null;
      return r.json().then(function (state) {
        if (!on) { on = true; build(); }
        draw(state);
        D.state = state;
      });
    }).catch(function () { return null; });
  }

  V.start = poll;
  V.beforeSnapshot = function () { return on ? poll() : Promise.resolve(); };
  V.onSnapshot = function (s) {
    if (on && D.parts.pipeline) D.parts.pipeline.snapshot(s);
  };
  V.highlighted = function (m) {
    return !!(highlight.ids[String(m.id)] || highlight.keys[m.key]);
  };
})();
