// The comparison HIT page. It shows the query and the candidates in the order the server drew
// for this assignment and sends back the position clicked; the server maps it to the candidate.
// The page never learns which model wrote a candidate, nor the right answer before it is stored.
(function () {
  "use strict";
  const app = document.getElementById("app");
  const studyId = app.dataset.study;
  const category = app.dataset.category || null;
  let current = null;

  function $(id) { return document.getElementById(id); }
  function show(id) {
    for (const section of ["join", "task", "feedback", "done"]) {
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
  function setBusy(busy) {
    for (const button of document.querySelectorAll("#candidates button, #next, #join-button")) {
      button.disabled = busy;
    }
  }
  function fail(error) { $("error").textContent = error.message; setBusy(false); }

  function render(view) {
    current = view;
    $("error").textContent = "";
    if (view.done) { $("done-message").textContent = view.message; show("done"); return; }
    if (view.feedback) { renderFeedback(view.feedback); setBusy(false); return; }
    const task = view.task;
    $("instructions").textContent = task.instructions;
    $("query").textContent = task.query;
    $("k").textContent = String(task.k);
    const box = $("candidates");
    box.replaceChildren();
    task.candidates.forEach((text, position) => {
      const button = document.createElement("button");
      button.id = "candidate-" + position;
      button.className = "candidate";
      button.dataset.position = String(position);
      button.textContent = text;
      button.addEventListener("click", () => choose(position));
      box.appendChild(button);
    });
    show("task");
    setBusy(false);
  }
  function renderFeedback(feedback) {
    $("result").textContent = feedback.message;
    const training = feedback.training === true;
    $("right").classList.toggle("hidden", !training);
    $("right-text").textContent = training ? feedback.right_text : "";
    show("feedback");
  }

  async function next() {
    setBusy(true);
    try { render(await call("POST", "/api/work/studies/" + studyId + "/next", { category: category })); }
    catch (error) { fail(error); }
  }
  async function choose(position) {
    setBusy(true);
    try {
      render(await call("POST", "/api/work/assignments/" + current.assignment_id + "/step",
        { step: current.task.step, choice: position }));
    } catch (error) { fail(error); }
  }

  $("next").addEventListener("click", next);
  $("join-button").addEventListener("click", async () => {
    setBusy(true);
    try {
      await call("POST", "/api/work/join", { provider: "local", name: $("name").value || null });
      await next();
    } catch (error) { fail(error); }
  });

  if (app.dataset.joined === "yes") { next(); } else { show("join"); setBusy(false); }
})();
