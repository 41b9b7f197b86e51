// flower web: fills the page from its live stream (server-sent events). No build step, no library.
// Every text of a run (model text, tool output, questions) is put in with textContent, never as markup;
// the two charts are the report's SVG, whose texts the server escaped.
"use strict";
(function () {
  var body = document.body;
  var kind = body.getAttribute("data-page");
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") node.textContent = attrs.text;
      else if (name === "on") Object.keys(attrs.on).forEach(function (e) { node.addEventListener(e, attrs.on[e]); });
      else node.setAttribute(name, attrs[name]);
    });
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) node.appendChild(arguments[i]);
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function money(v) { return v === null || v === undefined ? "-" : "$" + Number(v).toFixed(4); }
  function tokens(v) {
    if (v === null || v === undefined) return "-";
    return v >= 1000 ? (v / 1000).toFixed(v >= 100000 ? 0 : 1) + "K" : String(v);
  }
  function notice(text, ok) { var n = $("notice"); n.textContent = text; n.className = "notice " + (ok ? "ok" : "bad"); }
  function live(text, ok) { var n = $("live"); n.textContent = text; n.className = "live " + (ok ? "ok" : "bad"); }

  function act(url, payload) {
    return fetch(url, {method: "POST", headers: {"content-type": "application/json", "x-flower": "1"},
                       body: JSON.stringify(payload || {}), credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (reply) { notice(reply.message, reply.ok); return reply; })
      .catch(function () { notice("the server did not answer", false); return {ok: false}; });
  }

  // --- waiting questions: kept across updates, so a half-typed answer survives ---------------------
  var shown = {};
  function questionBox(q) {
    var input = el("input", {type: "text", "class": "answer", placeholder: "your answer"});
    var send = function (text, decline) {
      act("/api/answer", {qid: q.id, run: q.run, text: text, decline: decline});
    };
    var choices = el("span", {"class": "choices"});
    (q.options || []).forEach(function (option) {
      choices.appendChild(el("button", {"class": "option", text: option, on: {click: function () { send(option, false); }}}));
    });
    return el("div", {"class": "question", "data-qid": q.id, "data-run": q.run},
      el("p", {}, el("b", {text: q.id + " "}), el("span", {"class": "asked", text: q.question}),
         q.run ? el("small", {text: "  run " + q.run}) : null),
      choices, input,
      el("button", {"class": "do-answer", text: "Answer", on: {click: function () { send(input.value, false); }}}),
      el("button", {"class": "do-decline", text: "Decline", on: {click: function () { send(input.value, true); }}}));
  }
  function renderQuestions(list) {
    var box = $("questions"), keep = {};
    list.forEach(function (q) {
      var key = q.run + "/" + q.id;
      keep[key] = true;
      if (!shown[key]) { shown[key] = questionBox(q); box.appendChild(shown[key]); }
    });
    Object.keys(shown).forEach(function (key) {
      if (!keep[key]) { box.removeChild(shown[key]); delete shown[key]; }
    });
    box.setAttribute("data-count", String(list.length));
    if (!list.length && !box.querySelector(".none")) box.appendChild(el("p", {"class": "none", text: "no question is waiting"}));
    if (list.length) { var none = box.querySelector(".none"); if (none) box.removeChild(none); }
  }

  // --- the runs list -------------------------------------------------------------------------------
  var COLUMNS = [["run_id", "run"], ["workflow", "workflow"], ["state", "state"], ["done", "steps"],
                 ["cost_usd", "cost so far"], ["context", "context now"], ["questions", "waiting"], ["machines", "machines"],
                 ["started", "started"]];
  var sortKey = "started", sortDown = false, lastRuns = [];
  function cell(run, key) {
    if (key === "run_id") return el("a", {href: "/runs/" + encodeURIComponent(run.run_id), text: run.run_id});
    if (key === "done") return document.createTextNode(run.done + "/" + run.total);
    if (key === "cost_usd") return document.createTextNode(money(run.cost_usd));
    if (key === "context") return document.createTextNode(tokens(run.context));
    if (key === "machines") return document.createTextNode((run.machines || []).join(", "));
    if (key === "questions") return document.createTextNode(run.questions.length ? String(run.questions.length) : "");
    if (key === "state") return document.createTextNode(run.failed_at ? run.state + " at " + run.failed_at : run.state);
    return document.createTextNode(String(run[key] === null || run[key] === undefined ? "" : run[key]));
  }
  function renderRuns() {
    var table = clear($("runs")), words = $("filter").value.trim().toLowerCase();
    var head = el("tr");
    COLUMNS.forEach(function (c) {
      head.appendChild(el("th", {"data-key": c[0], text: c[1] + (sortKey === c[0] ? (sortDown ? " ▾" : " ▴") : ""),
        on: {click: function () { sortDown = sortKey === c[0] ? !sortDown : false; sortKey = c[0]; renderRuns(); }}}));
    });
    table.appendChild(el("thead", {}, head));
    var rows = lastRuns.filter(function (r) {
      return !words || [r.run_id, r.workflow, r.state].join(" ").toLowerCase().indexOf(words) >= 0;
    });
    rows.sort(function (a, b) {
      var x = sortKey === "questions" ? a.questions.length : a[sortKey], y = sortKey === "questions" ? b.questions.length : b[sortKey];
      var order = x === y ? 0 : (x === null || x < y ? -1 : 1);
      return sortDown ? -order : order;
    });
    var tbody = el("tbody");
    rows.forEach(function (run) {
      var tr = el("tr", {"data-run": run.run_id, "data-state": run.state, "class": "state-" + run.state});
      COLUMNS.forEach(function (c) { tr.appendChild(el("td", {"class": "c-" + c[0]}, cell(run, c[0]))); });
      tbody.appendChild(tr);
    });
    table.appendChild(tbody);
    if (!lastRuns.length) table.appendChild(el("caption", {text: "no workflow runs yet"}));
  }

  // --- one run -------------------------------------------------------------------------------------
  var runId = body.getAttribute("data-run"), logSession = "", stream = null;
  function table(node, rows, key) {
    clear(node);
    node.appendChild(el("tr", {}, el("th", {text: key}), el("th", {text: "messages"}), el("th", {text: "cost"})));
    rows.forEach(function (r) {
      node.appendChild(el("tr", {}, el("td", {text: r[key]}), el("td", {text: String(r.messages)}),
                          el("td", {text: money(r.cost_usd)})));
    });
  }
  function renderSteps(steps) {
    var list = clear($("steps"));
    steps.forEach(function (s) {
      var sessions = el("span", {"class": "sessions"});
      s.sessions.forEach(function (id, i) {
        sessions.appendChild(el("a", {href: "#log", "class": "session", text: (i ? " → " : "") + id.slice(0, 8),
          title: i < s.sessions.length - 1 ? "handed off to the next generation" : id,
          on: {click: function () { choose(id); }}}));
      });
      var bits = [s.state];
      if (s.cost_usd !== undefined && s.cost_usd !== null) bits.push(money(s.cost_usd));
      if (s.num_turns) bits.push(s.num_turns + " turns");
      if (s.context) bits.push(tokens(s.context) + " context");
      if (s.handoffs) bits.push(s.handoffs + " handoff" + (s.handoffs > 1 ? "s" : ""));
      if (s.refreshes) bits.push(s.refreshes + " refresh" + (s.refreshes > 1 ? "es" : ""));
      if (s.tool_errors) bits.push(s.tool_errors + " tool errors");
      if (s.machine) bits.push("on " + s.machine);
      if (s.branch && s.branch !== runId) bits.push("branch " + s.branch);
      list.appendChild(el("li", {"class": "step state-" + s.state, "data-step": s.step || "", "data-machine": s.machine || ""},
        el("b", {text: s.step || "?"}), el("span", {"class": "facts", text: "  " + bits.join(" · ") + "  "}), sessions,
        s.error ? el("div", {"class": "error", text: s.error}) : null));
    });
  }
  function renderLog(items) {
    var list = clear($("log"));
    items.forEach(function (item) {
      var li = el("li", {"class": "item kind-" + item.kind + " depth-" + item.depth});
      item.lines.forEach(function (line, i) {
        var when = i === 0 && item.time && item.kind !== "session" ? item.time.slice(11, 19) : "";
        var styles = (line.style || "").split(" ").filter(Boolean).map(function (s) { return "s-" + s; });
        li.appendChild(el("div", {"class": ["line"].concat(styles).join(" ")},
          el("span", {"class": "when", text: when}), el("span", {"class": "text", text: line.text})));
      });
      list.appendChild(li);
    });
  }
  function renderRun(view) {
    var run = view.run;
    $("run-id").textContent = run.run_id;
    $("state").textContent = run.failed_at ? run.state + " at " + run.failed_at : run.state;
    $("state").setAttribute("data-state", run.state);
    $("summary").textContent = run.workflow + " · " + run.done + "/" + run.total + " steps · " + money(run.cost_usd) + " so far" +
      " · context now " + tokens(view.contexts.length ? view.contexts[view.contexts.length - 1] : null) +
      (view.threshold ? " of " + tokens(view.threshold) + " (handoff)" : "") + " · model " + (view.model || "?") +
      " · tool errors " + view.tool_errors.main + " main / " + view.tool_errors.subagents + " workers · " +
      view.spills + " spills";
    renderSteps(view.steps);
    $("context").innerHTML = view.context_svg;   // the report's SVG: its texts are escaped server-side
    $("timeline").innerHTML = view.timeline_svg;
    $("context").setAttribute("data-points", String(view.contexts.length));
    table($("by-worker"), view.cost_by_worker, "worker");
    table($("by-model"), view.cost_by_model, "model");
    var select = clear($("log-session"));
    view.sessions.forEach(function (id) {
      var option = el("option", {value: id, text: id});
      if (id === view.log_session) option.selected = true;
      select.appendChild(option);
    });
    renderLog(view.log);
    renderQuestions(view.questions);
    var ended = ["finished", "failed", "cancelled"].indexOf(run.state) >= 0;
    $("cancel").disabled = ended;
    $("interrupt").disabled = ended;
    $("handoff").disabled = ended;
    body.setAttribute("data-updated", String(Date.now()));
  }
  function listen(url, event, render) {
    if (stream) stream.close();
    stream = new EventSource(url);
    stream.addEventListener(event, function (e) { live("live", true); render(JSON.parse(e.data)); });
    stream.addEventListener("problem", function (e) { live(JSON.parse(e.data).message, false); });
    stream.onerror = function () { live("reconnecting…", false); };
  }
  function choose(session) {
    logSession = session;
    listen("/runs/" + encodeURIComponent(runId) + "/events?session=" + encodeURIComponent(logSession), "run", renderRun);
  }

  if (kind === "runs") {
    $("filter").addEventListener("input", renderRuns);
    listen("/events", "runs", function (view) {
      lastRuns = view.runs;
      renderRuns();
      renderQuestions(view.questions);
      body.setAttribute("data-updated", String(Date.now()));
    });
  } else if (kind === "run") {
    $("log-session").addEventListener("change", function () { choose(this.value); });
    $("send").addEventListener("click", function () {
      var text = $("mail").value;
      act("/api/runs/" + encodeURIComponent(runId) + "/say", {text: text}).then(function (r) { if (r.ok) $("mail").value = ""; });
    });
    ["interrupt", "handoff"].forEach(function (what) {
      $(what).addEventListener("click", function () {
        act("/api/runs/" + encodeURIComponent(runId) + "/" + what, {text: $("mail").value})
          .then(function (r) { if (r.ok) $("mail").value = ""; });
      });
    });
    $("cancel").addEventListener("click", function () { $("cancel-yes").hidden = false; });
    $("cancel-yes").addEventListener("click", function () {
      $("cancel-yes").hidden = true;
      act("/api/runs/" + encodeURIComponent(runId) + "/cancel");
    });
    choose("");
  } else {
    live("", true);
  }
})();
