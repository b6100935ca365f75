// The comparison HIT page. It shows the query and the candidates in the order the server drew
// for this assignment and sends back the position clicked; the server maps it to the candidate.
// The page never learns which model wrote a candidate, nor the right answer before it is stored.
(function () {
  "use strict";
  let current = null;

  const $ = crowdTask.$;
  const page = crowdTask.page({
    sections: ["join", "task", "feedback", "done"],
    buttons: "#candidates button, #next, #join-button",
    render: render,
  });
  const { show, setBusy } = page;

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

  function choose(position) {
    return page.submit(() => page.post(current, "step", { step: current.task.step, choice: position }));
  }

  page.start();
})();
