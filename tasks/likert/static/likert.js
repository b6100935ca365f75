// The Likert HIT page: one question about the text at a time. The page holds only what the
// server's view gives it (never the text's group); each click sends one rating.
(function () {
  "use strict";
  let current = null;

  const $ = crowdTask.$;
  const page = crowdTask.page({
    sections: ["join", "task", "feedback", "done"],
    buttons: "#scale button, #next, #join-button",
    render: render,
  });
  const { show, setBusy } = page;
  function optional(boxId, textId, value) {
    const present = typeof value === "string" && value.length > 0;
    $(textId).textContent = present ? value : "";
    $(boxId).classList.toggle("hidden", !present);
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
      const button = document.createElement("button");
      button.type = "button";
      button.id = "rate-" + value;
      button.className = "rate";
      button.dataset.value = String(value);
      button.setAttribute("role", "radio");
      button.setAttribute("aria-checked", "false");
      button.textContent = String(value);
      button.addEventListener("click", () => rate(value, button));
      scale.appendChild(button);
    }
    show("task");
  }
  function render(view) {
    current = view;
    $("error").textContent = "";
    if (view.done) { $("done-message").textContent = view.message || "Done: thank you!"; show("done"); return; }
    if (view.feedback) { $("thanks").textContent = view.feedback.message; show("feedback"); setBusy(false); return; }
    renderTask(view.task);
    setBusy(false);
  }

  async function rate(value, button) {
    button.classList.add("chosen");
    button.setAttribute("aria-checked", "true");
    await page.submit(() => page.post(current, "step", { step: current.task.step, rating: value }),
      () => button.classList.remove("chosen"));
  }

  page.start();
})();
