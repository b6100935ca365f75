// The boundary HIT page. It holds only what the server has revealed: each click asks the
// server for the next sentence, and the true boundary arrives after the guess is stored.
(function () {
  "use strict";
  const app = document.getElementById("app");
  const studyId = app.dataset.study;
  const category = app.dataset.category || null;
  const LABELS = {
    grammar: "Grammar error", repetition: "Repetition", irrelevant: "Irrelevant",
    contradicts_sentence: "Contradicts an earlier sentence",
    contradicts_knowledge: "Contradicts world knowledge", common_sense: "Common-sense error",
    coreference: "Coreference error", generic: "Generic", other: "Other",
  };
  let current = null;

  function $(id) { return document.getElementById(id); }
  function show(id) {
    for (const section of ["join", "task", "explain", "reveal", "done"]) {
      $(section).classList.toggle("hidden", section !== id);
    }
  }
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
  function fail(error) { $("error").textContent = error.message; setBusy(false); }
  function setBusy(busy) {
    for (const id of ["human", "machine", "explain-button", "next", "join-button"]) {
      $(id).disabled = busy;
    }
  }
  function fillPassage(list, sentences, mark) {
    list.replaceChildren();
    sentences.forEach((text, index) => {
      const li = document.createElement("li");
      li.textContent = text;
      if (mark) { mark(li, index); }
      list.appendChild(li);
    });
  }

  function render(view) {
    current = view;
    setBusy(false);
    $("error").textContent = "";
    if (view.done) { $("done-message").textContent = view.message; show("done"); return; }
    if (view.feedback) { renderReveal(view.feedback); return; }
    const task = view.task;
    if (view.needs_followup) { renderExplain(task); return; }
    fillPassage($("passage"), task.sentences);
    $("position").textContent = String(task.step);
    $("total").textContent = String(task.n_sentences - 1);
    $("machine").disabled = task.step === 0;
    show("task");
  }
  function renderExplain(task) {
    $("guess-index").textContent = String(task.step);
    const box = $("reasons");
    box.replaceChildren();
    for (const tag of task.reason_tags) {
      const label = document.createElement("label");
      const input = document.createElement("input");
      input.type = "checkbox"; input.value = tag; input.name = "reason";
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + (LABELS[tag] || tag) + " "));
      box.appendChild(label);
    }
    show("explain");
  }
  function renderReveal(feedback) {
    const n = feedback.sentences.length;
    const verdict = feedback.boundary === n
      ? "This passage was entirely human-written."
      : "The machine took over at sentence " + feedback.boundary + ".";
    const yours = feedback.guess === n ? "You said: all human." : "You said: sentence " + feedback.guess + ".";
    $("result").textContent = verdict + " " + yours + " Points: " + feedback.points + ".";
    fillPassage($("full-passage"), feedback.sentences, (li, index) => {
      if (index >= feedback.boundary) { li.classList.add("machine"); }
      if (index === feedback.guess) { li.classList.add("guess"); }
    });
    show("reveal");
  }

  async function next() {
    setBusy(true);
    try { render(await call("POST", "/api/work/studies/" + studyId + "/next", { category: category })); }
    catch (error) { fail(error); }
  }
  async function choose(choice) {
    setBusy(true);
    try {
      render(await call("POST", "/api/work/assignments/" + current.assignment_id + "/step",
        { step: current.task.step, choice: choice }));
    } catch (error) { fail(error); }
  }

  $("human").addEventListener("click", () => choose("human"));
  $("machine").addEventListener("click", () => choose("machine"));
  $("next").addEventListener("click", next);
  $("explain-button").addEventListener("click", async () => {
    const reasons = Array.from(document.querySelectorAll("input[name=reason]:checked")).map((i) => i.value);
    setBusy(true);
    try {
      render(await call("POST", "/api/work/assignments/" + current.assignment_id + "/explanation",
        { explanation: $("explanation").value, reasons: reasons }));
      $("explanation").value = "";
    } catch (error) { fail(error); }
  });
  $("join-button").addEventListener("click", async () => {
    setBusy(true);
    try {
      await call("POST", "/api/work/join", { provider: "local", name: $("name").value || null });
      await next();
    } catch (error) { fail(error); }
  });

  if (app.dataset.joined === "yes") { next(); } else { show("join"); setBusy(false); }
})();
