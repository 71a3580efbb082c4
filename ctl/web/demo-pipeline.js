// demo-pipeline.js - the picture of the pipeline that leads the
// demonstration (demo.js): agent -> producer API -> PostgreSQL (business
// row + outbox record) -> relay workers (leases, fences) -> consumer and
// inbox -> downstream. Each box shows its figures from the snapshot
// (/api/overview: the outbox's counts, the leases held with their fences
// and the newest claimed message's fence, the consumer's counters) and the newest thing the running step or tool
// did there (/api/demo's events), lit up while it is new; the newest
// events are listed under the picture.
"use strict";

(function () {
  var D = window.OutboxDemo = window.OutboxDemo || { parts: {} };
  var V = window.OutboxView;
  var NODES = [
    { name: "agent", title: "Agent", role: "calls a tool; retries with the same Idempotency-Key",
      edge: "POST + Idempotency-Key" },
    { name: "producer", title: "Producer API", role: "claims the key, stores the response",
      edge: "one transaction" },
    { name: "outbox", title: "PostgreSQL", role: "business row + outbox record + key, together",
      edge: "claim: lease + fence" },
    { name: "relay", title: "Relay workers", role: "claim batches with a lease and a fencing token",
      edge: "nng, with the key" },
    { name: "consumer", title: "Consumer + inbox", role: "dedup record and effect in one transaction",
      edge: "applied once" },
    { name: "downstream", title: "Downstream", role: "the side effect", edge: null }
  ];
  var SHOWN_EVENTS = 8;
  var seen = 0; /* the newest event seq drawn */

  function node(name) { return V.$('#pipeline [data-node="' + name + '"]'); }

  function setField(name, field, text) {
    var e = node(name).querySelector('[data-field="' + field + '"]');
    if (e.textContent !== text) e.textContent = text;
  }

  D.parts.pipeline = {
    build: function (box) {
      var fig = V.el("figure", { "class": "pipe" });
      NODES.forEach(function (n) {
        var d = V.el("div", { "class": "pipe-node", "data-node": n.name });
        d.appendChild(V.el("h4", null, n.title));
        d.appendChild(V.el("p", { "class": "role" }, n.role));
        d.appendChild(V.el("p", { "data-field": "stat" }, ""));
        d.appendChild(V.el("p", { "data-field": "event", "class": "event" }, ""));
        fig.appendChild(d);
        if (n.edge) fig.appendChild(V.el("div", { "class": "pipe-edge" }, n.edge));
      });
      box.appendChild(fig);
      box.appendChild(V.el("p", { "class": "muted" }, "What the running step or tool did, newest first:"));
      box.appendChild(V.el("ol", { "id": "pipeline-events", "class": "events" }));
    },

    // /api/demo: the newest event of each node, lit while new
    draw: function (state) {
      var events = state.events || [];
      var newest = {};
      events.forEach(function (e) { newest[e.node] = e; });
      NODES.forEach(function (n) {
        var e = newest[n.name];
        var d = node(n.name);
        setField(n.name, "event", e ? e.text : "");
        d.setAttribute("data-seq", e ? String(e.seq) : "0");
        d.classList.toggle("fresh", !!e && e.seq > seen);
      });
      var ol = V.$("#pipeline-events");
      while (ol.firstChild) ol.removeChild(ol.firstChild);
      events.slice(-SHOWN_EVENTS).reverse().forEach(function (e) {
        var li = V.el("li", { "data-seq": String(e.seq), "data-node": e.node });
        li.appendChild(V.el("b", null, e.node));
        li.appendChild(V.el("span", null, " " + e.text));
        ol.appendChild(li);
      });
      if (events.length) seen = Math.max(seen, events[events.length - 1].seq);
    },

    // /api/overview: each box's figures
    snapshot: function (s) {
      var t = { pending: 0, inflight: 0, delivered: 0, dead: 0 };
      (s.topics || []).forEach(function (x) {
        Object.keys(t).forEach(function (k) { t[k] += x[k] || 0; });
      });
      setField("outbox", "stat", "pending " + t.pending + ", in flight " + t.inflight +
        ", delivered " + t.delivered + ", dead " + t.dead);
      var msgs = s.messages || [];
      var leases = msgs.filter(function (m) { return m.lease_owner; });
      /* the newest message a relay has claimed: its fence stays after delivery */
      var claimed = msgs.filter(function (m) { return m.fence > 0; })
        .sort(function (a, b) { return b.id - a.id; })[0];
      setField("relay", "stat", (leases.length === 0 ? "no lease held" :
        leases.slice(0, 3).map(function (m) {
          return "#" + m.id + " leased to " + m.lease_owner + ", fence " + m.fence +
            (m.lease_left_ms !== null && m.lease_left_ms !== undefined
              ? ", " + m.lease_left_ms + " ms left" : "");
        }).join("; ")) + (claimed ? "; newest claimed #" + claimed.id + ", fence " + claimed.fence : ""));
      var c = s.consumer;
      setField("consumer", "stat", c ? "duplicates answered " + V.show(c.duplicates) +
        ", key-reuse rejects " + V.show(c.key_reuse_rejects) : "no inbox database");
      setField("downstream", "stat", c ? "effects applied " + V.show(c.applied) : "");
      setField("producer", "stat", "records written " + (t.pending + t.delivered + t.dead));
    }
  };
})();
