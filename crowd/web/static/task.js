// Shared pieces of the HIT (worker) pages, loaded before each task's own script.
// window.crowdTask.page({sections, buttons, render}) wires the parts every page has in
// common: the #join form, the #next button, the #error line, the API calls and the sections
// of which one is shown at a time. The task's script keeps its own rendering.
(function () {
  "use strict";

  function $(id) { return document.getElementById(id); }

  async function call(method, url, body) {
    const response = await fetch(url, {
      method: method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) { throw new Error(data.error || ("HTTP " + response.status)); }
    return data;
  }

  // sections: ids of the <section>s, one shown at a time; buttons: a CSS selector for the
  // buttons disabled while a request is in flight; render(view): shows a view from the server.
  function page(options) {
    const app = $("app");
    const studyId = app.dataset.study;
    const category = app.dataset.category || null;

    function show(id) {
      for (const section of options.sections) {
        $(section).classList.toggle("hidden", section !== id);
      }
    }
    function setBusy(busy) {
      for (const button of document.querySelectorAll(options.buttons)) {
        button.disabled = busy;
      }
    }
    function fail(error) { $("error").textContent = error.message; setBusy(false); }

    // Disable the buttons, await the view that request() resolves to and render it; an
    // error is shown in #error (after onError, if given). True when the view was rendered.
    async function submit(request, onError) {
      setBusy(true);
      try {
        options.render(await request());
        return true;
      } catch (error) {
        if (onError) { onError(error); }
        fail(error);
        return false;
      }
    }
    function next() {
      return submit(() => call("POST", "/api/work/studies/" + studyId + "/next", { category: category }));
    }
    // POST to /api/work/assignments/<the view's assignment>/<action>.
    function post(view, action, body) {
      return call("POST", "/api/work/assignments/" + view.assignment_id + "/" + action, body);
    }
    // Wire #next and #join-button, then fetch the first view or show the join form.
    function start() {
      $("next").addEventListener("click", next);
      $("join-button").addEventListener("click", async () => {
        setBusy(true);
        try {
          await call("POST", "/api/work/join", { provider: "local", name: $("name").value || null });
          await next();
        } catch (error) { fail(error); }
      });
      if (app.dataset.joined === "yes") { next(); } else { show("join"); setBusy(false); }
    }

    return { show: show, setBusy: setBusy, fail: fail, submit: submit, next: next, post: post, start: start };
  }

  window.crowdTask = { $: $, call: call, page: page };
})();
