// The comparison HIT page. It shows the query and the candidates in the order the server drew
// for this assignment; the worker selects one (and may change it), then submits, and the page
// sends back the position picked; the server maps it to the candidate. The page never learns
// which model wrote a candidate, nor the right answer before it is stored.
(function () {
  "use strict";
  let current = null;

  const $ = crowdTask.$;
  const page = crowdTask.page({
    sections: ["join", "task", "feedback", "done"],
    buttons: "#candidates input, #submit-pick, #next, #join-button, #decline",
    render: render,
  });
  const { show, setBusy } = page;

  function picked() {
    const checked = document.querySelector("#candidates input[name=candidate]:checked");
    return checked === null ? null : Number(checked.value);
  }

  function render(view) {
    current = view;
    if (view.done) { $("done-message").textContent = view.message; show("done"); return; }
    if (view.feedback) { renderFeedback(view.feedback); setBusy(false); return; }
    const task = view.task;
    $("instructions").textContent = task.instructions;
    $("query").textContent = task.query;
    $("k").textContent = String(task.k);
    const box = $("candidates");
    for (const old of box.querySelectorAll("label.candidate")) { old.remove(); }
    task.candidates.forEach((text, position) => {
      const label = document.createElement("label");
      label.className = "candidate";
      const input = document.createElement("input");
      input.type = "radio";
      input.name = "candidate";
      input.id = "candidate-" + position;
      input.value = String(position);
      const span = document.createElement("span");
      span.textContent = text;
      label.appendChild(input);
      label.appendChild(span);
      box.appendChild(label);
    });
    show("task");
    setBusy(false);
    $("submit-pick").disabled = true;
    crowdTask.refocus($("candidate-0"));
  }
  function renderFeedback(feedback) {
    $("result").textContent = feedback.message;
    const training = feedback.training === true;
    $("right").classList.toggle("hidden", !training);
    $("right-text").textContent = training ? feedback.right_text : "";
    show("feedback");
    crowdTask.refocus($("next"));
  }

  $("candidates").addEventListener("change", () => { $("submit-pick").disabled = picked() === null; });
  $("pick-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const position = picked();
    if (position === null) { $("error").textContent = "Pick a candidate first."; return; }
    page.submit(() => page.post(current, "step", { step: current.task.step, choice: position }),
      () => { $("submit-pick").disabled = picked() === null; });
  });

  page.start();
})();
