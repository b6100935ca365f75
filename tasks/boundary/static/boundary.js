// The boundary HIT page. It holds only what the server has revealed: each click asks the
// server for the next sentence, and the true boundary arrives after the guess is stored.
// The server counts sentences from 0 (sentence 0 is always human); the worker reads them
// from 1, so every number shown is the server's index + 1.
(function () {
  "use strict";
  const LABELS = {
    grammar: "Grammar error", repetition: "Repetition", irrelevant: "Irrelevant",
    contradicts_sentence: "Contradicts an earlier sentence",
    contradicts_knowledge: "Contradicts world knowledge", common_sense: "Common-sense error",
    coreference: "Coreference error", generic: "Generic", other: "Other",
  };
  const MAX_POINTS = 5;
  let current = null;
  let pending = null;  // the choice waiting for the worker's confirmation
  let explaining = null;  // the assignment whose explanation the watcher is counting

  const $ = crowdTask.$;
  const page = crowdTask.page({
    sections: ["join", "task", "explain", "reveal", "done"],
    buttons: "#human, #machine, #confirm-yes, #confirm-no, #explain-button, #next, #join-button, #decline",
    render: render,
  });
  const { show, setBusy } = page;
  const typing = crowdTask.watchTyping($("explanation"));
  function fillPassage(list, sentences, mark) {
    list.replaceChildren();
    sentences.forEach((text, index) => {
      const li = document.createElement("li");
      li.textContent = text;
      if (mark) { mark(li, index); }
      list.appendChild(li);
    });
  }
  function sentences(count) { return count === 1 ? "1 sentence" : count + " sentences"; }

  function render(view) {
    current = view;
    setBusy(false);
    if (view.done) { $("done-message").textContent = view.message; show("done"); return; }
    if (view.feedback) { renderReveal(view.feedback); return; }
    const task = view.task;
    if (view.needs_followup) { renderExplain(task); return; }
    const last = task.step === task.n_sentences - 1;
    fillPassage($("passage"), task.sentences, (li, index) => {
      if (index === task.step) { li.classList.add("current"); }
    });
    $("position").textContent = String(task.step + 1);
    $("total").textContent = String(task.n_sentences);
    $("current").textContent = String(task.step + 1);
    // Past the last sentence there is nothing to reveal: "human" is the final answer.
    $("human").textContent = last ? "Human to the end" : "Still human";
    $("machine").disabled = task.step === 0;
    closeConfirm();
    show("task");
    crowdTask.refocus($("human"));
  }
  function renderExplain(task) {
    $("guess-index").textContent = String(task.step + 1);
    if (explaining !== current.assignment_id) {  // a new assignment: count from scratch
      explaining = current.assignment_id;
      $("explanation").value = "";
      typing.reset();
    }
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
    crowdTask.refocus($("explanation"));
  }
  function pointsWhy(guess, boundary, points) {
    const distance = guess - boundary;
    if (distance === 0) { return "Exact: " + MAX_POINTS + " points."; }
    if (distance < 0) { return "Too early: the sentence you named was still human-written, so 0 points."; }
    return sentences(distance) + " too late: " + MAX_POINTS + " − " + distance + " = " + points
      + (points === 1 ? " point" : " points") + (MAX_POINTS - distance < 0 ? " (never below 0)." : ".");
  }
  function renderReveal(feedback) {
    const n = feedback.sentences.length;
    const verdict = feedback.boundary === n
      ? "This passage was entirely human-written."
      : "The machine took over at sentence " + (feedback.boundary + 1) + ".";
    const yours = feedback.guess === n ? "You said: all human." : "You said: sentence " + (feedback.guess + 1) + ".";
    $("result").textContent = verdict + " " + yours + " Points: " + feedback.points + ".";
    $("points-why").textContent = pointsWhy(feedback.guess, feedback.boundary, feedback.points);
    fillPassage($("full-passage"), feedback.sentences, (li, index) => {
      if (index >= feedback.boundary) { li.classList.add("machine"); }
      if (index === feedback.guess) { li.classList.add("guess"); }
    });
    show("reveal");
    crowdTask.refocus($("next"));
  }

  function send(choice) {
    return page.submit(() => page.post(current, "step", { step: current.task.step, choice: choice }));
  }
  // A final answer (machine from here, or human to the end) waits for a second click.
  function askConfirm(choice) {
    pending = choice;
    const shown = current.task.step + 1;
    $("confirm-text").textContent = choice === "machine"
      ? "Your answer: the machine took over at sentence " + shown + ". You cannot change it after this."
      : "Your answer: the whole passage is human-written. You cannot change it after this.";
    $("choices").classList.add("hidden");
    $("confirm").classList.remove("hidden");
    $("confirm-yes").focus();
  }
  function closeConfirm() {
    pending = null;
    $("confirm").classList.add("hidden");
    $("choices").classList.remove("hidden");
  }

  $("human").addEventListener("click", () => {
    if (current.task.step === current.task.n_sentences - 1) { askConfirm("human"); } else { send("human"); }
  });
  $("machine").addEventListener("click", () => askConfirm("machine"));
  $("confirm-yes").addEventListener("click", () => { if (pending) { send(pending); } });
  function goBack() {
    const back = pending === "machine" ? $("machine") : $("human");
    closeConfirm();
    back.focus();
  }
  $("confirm-no").addEventListener("click", goBack);
  $("confirm").addEventListener("keydown", (event) => {
    if (event.key === "Escape" && pending) { event.preventDefault(); goBack(); }
  });
  $("explanation").addEventListener("input", () => { $("error").textContent = ""; });
  $("reasons").addEventListener("change", () => { $("error").textContent = ""; });
  $("explain-button").addEventListener("click", async () => {
    const reasons = Array.from(document.querySelectorAll("input[name=reason]:checked")).map((i) => i.value);
    if (!$("explanation").value.trim() && reasons.length === 0) {
      $("error").textContent = "Say why: write a few words or pick a reason.";
      $("explanation").focus();
      return;
    }
    const sent = await page.submit(() => page.post(current, "explanation",
      { explanation: $("explanation").value, reasons: reasons, typing: typing.report() }));
    if (sent) { $("explanation").value = ""; }
  });

  page.start();
})();
