// demo-exercises.js - the graded exercises at the bottom of the
// demonstration (demo.js), as the first article ends its demonstrations:
// questions on the idempotency stepper, the article's 25 combinations and
// the herd simulator, each answered here and checked in the page. Every
// answer is one the stepper, the 25 cells or outbox-herd shows when run
// (the browser test checks each against them).
"use strict";

(function () {
  var D = window.OutboxDemo = window.OutboxDemo || { parts: {} };
  var V = window.OutboxView;
  var FAULT_CHOICES = ["lost-response", "crash-mid-request", "concurrent-dup",
    "new-tool-call-id", "reworded-title"];
  var EXERCISES = [
    { id: "split-crash", kind: "number", answer: "2",
      q: "Server key_split, key source run_id:tool_use_id, and the server crashes mid-request. " +
         "How many reports are left in app.bug_reports?",
      why: "key_split writes the report, then records the key, in two transactions; the " +
           "crash between them leaves a report and no key, so the retry writes a second " +
           "report. Step through it in the stepper." },
    { id: "new-id", kind: "choice", answer: "business",
      options: ["none", "per_attempt", "tool_call", "business"],
      q: "The model calls the tool again with a new tool_use id; the server is key_atomic. " +
         "Which key source still leaves one report?",
      why: "Only a key made from the content (run + module + title) is the same for the new " +
           "tool_use id; run_id:tool_use_id changes with it." },
    { id: "reworded", kind: "choice", answer: "reworded-title", options: FAULT_CHOICES,
      q: "Which fault does none of the article's five rows survive with one report?",
      why: "A reworded title is a new request by every key source: no server can tell it is " +
           "the same report (the last column of the 25 is all 2)." },
    { id: "per-attempt", kind: "choice", answer: "crash-mid-request", options: FAULT_CHOICES,
      q: "A new UUID per attempt, server key_atomic: in which fault is it one report, by luck?",
      why: "The crash comes before anything is written, so the first attempt left nothing; a " +
           "fresh key per attempt protects against nothing else." },
    { id: "herd", kind: "choice", answer: "none", options: ["none", "equal", "full"],
      q: "Simulate 100 clients, seed 1, once with each: no backoff (none), Equal Jitter, Full " +
         "Jitter. Which one makes the most write requests?",
      why: "Retrying at once makes every losing client write again immediately; jitter spreads " +
           "the retries out so fewer of them collide." }
  ];
  D.exercises = EXERCISES;

  function score(box) {
    var right = box.querySelectorAll('li[data-result="right"]').length;
    box.querySelector('[data-field="score"]').textContent = right + " of " + EXERCISES.length + " right";
  }

  function check(li, x, box) {
    var given = String(li.querySelector('[data-field="answer"]').value).trim();
    var ok = given === x.answer;
    li.setAttribute("data-result", given === "" ? "" : ok ? "right" : "wrong");
    li.querySelector('[data-field="grade"]').textContent = given === "" ? "answer first" :
      ok ? "right" : "wrong";
    li.querySelector('[data-field="why"]').textContent = given === "" ? "" :
      ok ? x.why : "Not " + given + ". Try it in the demonstration above, then answer again.";
    score(box);
  }

  D.parts.exercises = {
    build: function (box) {
      box.appendChild(V.el("h3", null, "Exercises"));
      box.appendChild(V.el("p", { "class": "muted" }, "Answer, then check: graded here, " +
        "from what the stepper, the 25 combinations and the simulator show."));
      var ol = V.el("ol");
      EXERCISES.forEach(function (x) {
        var li = V.el("li", { "data-exercise": x.id });
        li.appendChild(V.el("p", null, x.q));
        var a;
        if (x.kind === "number") {
          a = V.el("input", { "type": "number", "min": "0", "data-field": "answer" });
        } else {
          a = V.el("select", { "data-field": "answer" });
          a.appendChild(V.el("option", { "value": "" }, "(choose)"));
          x.options.forEach(function (o) { a.appendChild(V.el("option", { "value": o }, o)); });
        }
        li.appendChild(a);
        var b = V.el("button", { "type": "button", "data-action": "check" }, "check");
        b.addEventListener("click", function () { check(li, x, box); });
        li.appendChild(b);
        li.appendChild(V.el("b", { "data-field": "grade", "class": "grade" }, ""));
        li.appendChild(V.el("p", { "data-field": "why", "class": "muted" }, ""));
        ol.appendChild(li);
      });
      box.appendChild(ol);
      box.appendChild(V.el("p", { "data-field": "score", "class": "facts" }, "0 of " +
        EXERCISES.length + " right"));
    }
  };
})();
