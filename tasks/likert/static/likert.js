// The Likert HIT page: one question about the text at a time. The page holds only what the
// server's view gives it (never the text's group). The worker selects a rating (and may
// change it), then sends it with the button; the last question's rating stores the answer.
(function () {
  "use strict";
  let current = null;

  const $ = crowdTask.$;
  const page = crowdTask.page({
    sections: ["join", "task", "feedback", "done"],
    buttons: "#scale input, #submit-rating, #next, #join-button, #decline",
    render: render,
  });
  const { show, setBusy } = page;
  function optional(boxId, textId, value) {
    const present = typeof value === "string" && value.length > 0;
    $(textId).textContent = present ? value : "";
    $(boxId).classList.toggle("hidden", !present);
  }
  function chosen() {
    const checked = document.querySelector("#scale input[name=rating]:checked");
    return checked === null ? null : Number(checked.value);
  }

  function renderTask(task) {
    $("instructions").textContent = task.instructions || "";
    $("position").textContent = String(task.step + 1);
    $("total").textContent = String(task.n_steps);
    optional("prompt-box", "prompt", task.prompt);
    optional("reference-box", "reference", task.reference);
    // With a reference the two texts are "title 1" (reference) and "title 2" (the text).
    $("text-label").textContent = task.reference ? "Title 2:" : "Text:";
    $("text").textContent = task.text;
    const attribute = task.attribute;
    $("question").textContent = attribute.question;
    $("label-low").textContent = attribute.labels[0] || "";
    $("label-high").textContent = attribute.labels[1] || "";
    const scale = $("scale");
    scale.replaceChildren();
    for (let value = attribute.scale[0]; value <= attribute.scale[1]; value += 1) {
      const label = document.createElement("label");
      label.className = "rate";
      const input = document.createElement("input");
      input.type = "radio";
      input.name = "rating";
      input.id = "rate-" + value;
      input.value = String(value);
      label.appendChild(input);
      label.appendChild(document.createTextNode(String(value)));
      scale.appendChild(label);
    }
    const last = task.step + 1 >= task.n_steps;
    $("submit-rating").textContent = last ? "Submit ratings" : "Next question";
    show("task");
  }
  function render(view) {
    current = view;
    if (view.done) { $("done-message").textContent = view.message || "Done: thank you!"; show("done"); return; }
    if (view.feedback) {
      $("thanks").textContent = view.feedback.message; show("feedback"); setBusy(false);
      crowdTask.refocus($("next"));
      return;
    }
    renderTask(view.task);
    setBusy(false);
    $("submit-rating").disabled = true;
    crowdTask.refocus(document.querySelector("#scale input"));
  }

  $("scale").addEventListener("change", () => { $("submit-rating").disabled = chosen() === null; });
  $("rate-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = chosen();
    if (value === null) { $("error").textContent = "Pick a rating first."; return; }
    page.submit(() => page.post(current, "step", { step: current.task.step, rating: value }));
  });

  page.start();
})();
