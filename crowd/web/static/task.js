// Shared pieces of the HIT (worker) pages, loaded before each task's own script.
// window.crowdTask.page({sections, buttons, render}) wires the parts every page has in
// common: the intro (#join: instructions, examples, consent, the open web's name), the #next
// button, the "item i of n" line, the #error line, the API calls and the sections of which one
// is shown at a time. The task's script keeps its own rendering.
// window.crowdTask.watchTyping(field) counts how a free-text answer was entered.
(function () {
  "use strict";

  function $(id) { return document.getElementById(id); }

  // On a crowd platform's page (MTurk's frame, Prolific) the worker token comes with the page:
  // a cookie set in a third-party frame would be dropped by the browser.
  function headers(body) {
    const result = body === undefined ? {} : { "Content-Type": "application/json" };
    const token = document.getElementById("app") && $("app").dataset.workerToken;
    if (token) { result["X-Crowd-Worker"] = token; }
    return result;
  }

  // What a worker reads when a call fails: the server's words are written for developers
  // (they name endpoints); the page says what happened and what the worker can do.
  function friendly(status, data) {
    const type = data.type || "";
    if (status === 401) { return "Your visit has expired. Reload the page to go on."; }
    if (status === 403) { return "You cannot take part in this study. Thank you for your interest."; }
    if (status === 404) { return "This task is no longer available. Reload the page, or pick another study."; }
    if (type === "StudyNotOpen") { return "This study is not open right now. Please come back later."; }
    if (status === 409) { return "This page is out of date (is it open twice?). Reload it to go on."; }
    if (status === 422 && data.field === "name") { return "Your name: " + (data.error || "not allowed") + "."; }
    if (status === 429) { return "Too many clicks at once. Wait a moment and try again."; }
    if (status >= 500) { return "Something went wrong on our side. Try again in a minute."; }
    return "Something went wrong. Reload the page to go on.";
  }

  async function call(method, url, body) {
    let response;
    try {
      response = await fetch(url, {
        method: method,
        headers: headers(body),
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
      });
    } catch (error) {
      throw new Error("We could not reach the server. Check your connection and try again.");
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = new Error(friendly(response.status, data));
      error.status = response.status;
      error.detail = data.error;
      error.field = data.field;
      throw error;
    }
    return data;
  }

  // sections: ids of the <section>s, one shown at a time; buttons: a CSS selector for the
  // buttons disabled while a request is in flight; render(view): shows a view from the server.
  function page(options) {
    const app = $("app");
    const studyId = app.dataset.study;
    const category = app.dataset.category || null;
    // The experimenter's preview sends the same calls to a base that stores nothing.
    const base = app.dataset.apiBase || "/api/work";
    const sections = ["declined"].concat(options.sections);
    let counted = null;  // the assignment whose "item i of n" the page shows

    function show(id) {
      for (const section of sections) {
        if ($(section)) { $(section).classList.toggle("hidden", section !== id); }
      }
      // The instructions stay at hand once the items have begun.
      $("help").classList.toggle("hidden", id === "join" || id === "declined" || id === "none");
      if (id === "join" || id === "declined" || id === "done") { $("progress").classList.add("hidden"); }
    }
    function setBusy(busy) {
      for (const button of document.querySelectorAll(options.buttons)) {
        button.disabled = busy;
      }
    }
    function fail(error) { $("error").textContent = error.message; setBusy(false); }

    // "Item i of n": the reply to next counts (the server knows the session); the steps of the
    // same assignment keep that count.
    function count(view) {
      if (view.done) { counted = null; return; }
      if (view.item_number !== undefined && view.items_total !== undefined) {
        counted = view.assignment_id;
        $("item-number").textContent = String(view.item_number);
        $("items-total").textContent = String(view.items_total);
      }
      $("progress").classList.toggle("hidden", counted === null || counted !== view.assignment_id);
    }

    // An answer stored but waiting for its follow-up (a boundary guess's explanation) is no
    // longer the worker's open item: the browser keeps its id, so a reload asks for it again
    // rather than skip to the next item. (Not in the preview: it has no worker.)
    function followupKey() { return "crowd-followup:" + studyId + ":" + app.dataset.worker; }
    function keepFollowup(view) {
      if (!app.dataset.worker) { return; }
      try {
        if (view.needs_followup) {
          sessionStorage.setItem(followupKey(), JSON.stringify({
            id: view.assignment_id, number: $("item-number").textContent, total: $("items-total").textContent,
          }));
        } else { sessionStorage.removeItem(followupKey()); }
      } catch (error) { /* storage blocked: a reload goes on with the next item */ }
    }
    async function resume() {
      let kept = null;
      try { kept = app.dataset.worker && JSON.parse(sessionStorage.getItem(followupKey()) || "null"); }
      catch (error) { kept = null; }
      if (kept && kept.id) {
        try {
          const view = await call("GET", base + "/assignments/" + kept.id);
          if (view.needs_followup) {
            options.render(view);
            count({ assignment_id: view.assignment_id, item_number: kept.number, items_total: kept.total });
            return true;
          }
        } catch (error) { /* gone or done elsewhere: go on with the next item */ }
        keepFollowup({});
      }
      return next();
    }

    // Disable the buttons, await the view that request() resolves to and render it; an
    // error is shown in #error (after onError, if given). True when the view was rendered.
    async function submit(request, onError) {
      setBusy(true);
      try {
        const view = await request();
        $("error").textContent = "";
        options.render(view);
        count(view);
        keepFollowup(view);
        if (view.done && view.completion) { complete(view.completion); }
        return true;
      } catch (error) {
        if (onError) { onError(error); }
        fail(error);
        return false;
      }
    }
    function next() {
      return submit(() => call("POST", base + "/studies/" + studyId + "/next", { category: category }));
    }
    // POST to <base>/assignments/<the view's assignment>/<action>.
    function post(view, action, body) {
      return call("POST", base + "/assignments/" + view.assignment_id + "/" + action, body);
    }
    // Hand the finished work back to the crowd platform: a form posted to MTurk's
    // externalSubmit, or a completion code for Prolific. Our server stored every answer
    // before it sent this.
    function complete(completion) {
      $("completion").classList.remove("hidden");
      if (completion.kind === "form") {
        const form = $("completion-form");
        form.action = completion.action;
        for (const name in completion.fields) {
          const input = document.createElement("input");
          input.type = "hidden"; input.name = name; input.value = completion.fields[name];
          form.appendChild(input);
        }
        form.classList.remove("hidden");
        $("submit-work").disabled = false;
      } else if (completion.kind === "code") {
        $("code").textContent = completion.code;
        $("code-link").href = completion.url;
        $("completion-code").classList.remove("hidden");
      }
    }

    // The intro is shown once per worker and study: the server says when the worker has had
    // an item of the study; the browser remembers the intro from the click to the first item
    // (and where no item came). The preview (no worker) shows it every time.
    function introKey(worker) { return "crowd-intro:" + studyId + ":" + worker; }
    function introSeen() {
      if (app.dataset.started === "yes") { return true; }
      try { return Boolean(app.dataset.worker) && localStorage.getItem(introKey(app.dataset.worker)) === "yes"; }
      catch (error) { return false; }  // storage blocked (a third-party frame): show it again
    }
    function rememberIntro(worker) {
      if (!worker) { return; }
      try { localStorage.setItem(introKey(worker), "yes"); } catch (error) { /* shown again */ }
    }

    // Wire the intro and #next; then go on to begin() (default: the first item) when the worker
    // has been through the intro, or show it. A crowd platform's preview shows the intro only.
    function start(begin) {
      if (app.dataset.preview === "yes") { show("join"); setBusy(true); return; }
      if (!begin) {  // a page of items: #next asks for the next one
        begin = resume;
        $("next").addEventListener("click", next);
      }
      $("join-button").addEventListener("click", async () => {
        setBusy(true);
        try {
          let worker = app.dataset.worker;
          if (app.dataset.joined !== "yes") {
            const joined = await call("POST", "/api/work/join", { provider: "local", name: $("name").value || null });
            worker = String(joined.worker_id);
            app.dataset.joined = "yes"; app.dataset.worker = worker;
          }
          rememberIntro(worker);
          $("error").textContent = "";
          await begin();
        } catch (error) { fail(error); }
      });
      if ($("decline")) {
        $("decline").addEventListener("click", () => { show("declined"); $("reconsider").focus(); });
        $("reconsider").addEventListener("click", () => { show("join"); $("join-button").focus(); });
      }
      if (app.dataset.joined === "yes" && introSeen()) { begin(); } else { show("join"); setBusy(false); }
    }

    return { show: show, setBusy: setBusy, fail: fail, submit: submit, next: next, post: post, start: start };
  }

  // Focus `element` when the focus was lost (the clicked button was disabled or hidden), so a
  // keyboard user goes on from where the new content is.
  function refocus(element) {
    const active = document.activeElement;
    if (element && (!active || active === document.body || active.disabled || active.offsetParent === null)) {
      element.focus({ preventScroll: false });
    }
  }

  // How a free-text answer was entered: keys that add or delete characters, pastes (and text
  // dropped in from elsewhere) with their length, and the time from the first key or paste to
  // the last change. A large share of crowd workers paste LLM output instead of writing their
  // own; the page only counts, the server judges the numbers (crowd/quality/standing.py, qc/anomalies.py).
  // watchTyping(field) -> {report(): {keys, pastes, pasted_chars, typing_ms}, reset()}.
  const TYPING_LIMITS = { keys: 100000, pastes: 1000, pasted_chars: 100000, typing_ms: 86400000 };
  function watchTyping(field) {
    let keys = 0, pastes = 0, pastedChars = 0, first = null, last = null, dragFromField = false;
    function began() { if (first === null) { first = performance.now(); } }
    function pasted(text) { pastes += 1; pastedChars += text.length; began(); }

    field.addEventListener("keydown", (event) => {
      // One character (a surrogate pair counts as one), Enter, Backspace or Delete; not a
      // shortcut (Ctrl/Cmd+key, AltGr aside) or a modifier alone. Keys that go to an input
      // method (IME, many phone keyboards) arrive as "Process"/keyCode 229 and do write text.
      const key = event.key || "";
      const shortcut = (event.ctrlKey || event.metaKey) && !event.getModifierState("AltGraph");
      const writes = (Array.from(key).length === 1 && !shortcut)
        || key === "Enter" || key === "Backspace" || key === "Delete"
        || event.isComposing || event.keyCode === 229;
      if (writes) { keys += 1; began(); }
    });
    field.addEventListener("paste", (event) => {
      pasted((event.clipboardData && event.clipboardData.getData("text")) || "");
    });
    // Text dragged in from elsewhere is pasted text too; moving text within the field is not.
    field.addEventListener("dragstart", () => { dragFromField = true; });
    field.addEventListener("dragend", () => { dragFromField = false; });
    field.addEventListener("drop", (event) => {
      if (!dragFromField) { pasted((event.dataTransfer && event.dataTransfer.getData("text")) || ""); }
    });
    field.addEventListener("input", () => { if (first !== null) { last = performance.now(); } });

    return {
      report() {
        // Capped at what the server accepts, so a long session never gets the answer refused.
        const counts = {
          keys: keys, pastes: pastes, pasted_chars: pastedChars,
          typing_ms: last === null ? 0 : Math.round(last - first),
        };
        for (const name in counts) { counts[name] = Math.min(counts[name], TYPING_LIMITS[name]); }
        return counts;
      },
      reset() { keys = 0; pastes = 0; pastedChars = 0; first = null; last = null; },
    };
  }

  window.crowdTask = { $: $, call: call, page: page, refocus: refocus, watchTyping: watchTyping };
})();
