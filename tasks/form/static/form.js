// The form HIT page: the item's attachments and the fields the server's view declares,
// generated here (never the expected answers: the view holds none). Conditional fields
// (show_if) appear and disappear as the worker answers; only shown fields are sent. Nothing is
// stored until "Submit answers", which sends every answer at once. A rank starts in an order
// the server drew for this assignment and is sent as positions in it; it counts as answered
// once the worker moved a line or ticked "This order is right". Training items come back
// with what was expected of each field.
(function () {
  "use strict";
  let current = null;
  let fields = [];  // the view's fields, each with its rendered parts (see build)

  const $ = crowdTask.$;
  const page = crowdTask.page({
    sections: ["join", "task", "feedback", "done"],
    buttons: "#submit-form, #next, #join-button, #decline",
    render: render,
  });
  const { show, setBusy } = page;

  function el(tag, props, children) {
    const node = document.createElement(tag);
    for (const key in props || {}) {
      if (key === "text") { node.textContent = props[key]; }
      else if (key === "class") { node.className = props[key]; }
      else { node.setAttribute(key, props[key]); }
    }
    for (const child of children || []) { if (child) { node.appendChild(child); } }
    return node;
  }

  // -- attachments -----------------------------------------------------------------------
  function attachmentName(attachment, index) {
    return (attachment.type === "image" ? "Image " : "Text ") + (index + 1);
  }
  function renderAttachments(attachments) {
    const box = $("attachments");
    box.replaceChildren();
    attachments.forEach((attachment, index) => {
      const part = el("section", { class: "attachment", "aria-label": attachmentName(attachment, index) },
        [el("h3", { text: attachmentName(attachment, index) })]);
      if (attachment.type === "image") {
        part.appendChild(el("img", { src: attachment.content, alt: attachment.alt || attachmentName(attachment, index) }));
      } else if (attachment.type === "html") {
        const html = el("div", { class: "attachment-html" });
        html.innerHTML = attachment.content;  // sanitised on upload (tasks/form/items.py)
        part.appendChild(html);
      } else {
        part.appendChild(el("div", { class: "attachment-text", text: attachment.content }));
      }
      box.appendChild(part);
    });
  }

  // -- fields ----------------------------------------------------------------------------
  // The things a rank orders, in the view's start order (field.order: the declared index
  // at each position; choices already come in that order).
  function rankThings(field, attachments) {
    if (field.choices) { return field.choices.map((choice) => choice.label); }
    return field.order.map((index) => attachmentName(attachments[index], index));
  }

  function build(field, index, attachments) {
    const key = "f" + index;  // field ids may hold spaces: the DOM uses the position
    const legend = el("legend", { id: key + "-title", text: field.title });
    if (!field.required) { legend.appendChild(el("span", { class: "optional", text: " (optional)" })); }
    const box = el("fieldset", { class: "form-field", id: key, "data-field": field.id }, [legend]);
    const described = [];
    if (field.help) { box.appendChild(el("p", { class: "field-help", id: key + "-help", text: field.help })); described.push(key + "-help"); }
    const part = { field: field, box: box, key: key };
    if (field.type === "rating") { buildRating(part); }
    else if (field.type === "category") { buildCategory(part, described); }
    else if (field.type === "text") { buildText(part, described); }
    else { buildRank(part, rankThings(field, attachments), described); }
    part.error = el("p", { class: "field-error", id: key + "-error", role: "alert" });
    box.appendChild(part.error);
    described.push(key + "-error");
    box.setAttribute("aria-describedby", described.join(" "));
    return part;
  }

  function buildRating(part) {
    const field = part.field;
    const points = el("span", { class: "scale-points" });
    for (let value = field.scale[0]; value <= field.scale[1]; value += 1) {
      const input = el("input", { type: "radio", name: part.key, value: String(value), id: part.key + "-" + value });
      // The end labels are part of the ends' names, for those who cannot see the layout.
      const end = value === field.scale[0] ? field.labels[0] : value === field.scale[1] ? field.labels[1] : "";
      if (end) { input.setAttribute("aria-label", value + " (" + end + ")"); }
      points.appendChild(el("label", { class: "rate" }, [input, document.createTextNode(String(value))]));
    }
    part.box.appendChild(el("div", { class: "scale" }, [
      field.labels[0] ? el("span", { class: "endpoint", "aria-hidden": "true", text: field.labels[0] }) : null,
      points,
      field.labels[1] ? el("span", { class: "endpoint", "aria-hidden": "true", text: field.labels[1] }) : null,
    ]));
    part.value = () => {
      const checked = part.box.querySelector("input:checked");
      return checked === null ? null : Number(checked.value);
    };
  }

  function categoryRule(field) {
    if (field.max_choices === 1) { return field.min_choices === 0 ? "Choose one, or none." : ""; }
    if (field.min_choices === field.max_choices) { return "Choose " + field.max_choices + "."; }
    if (field.min_choices === 0) { return "Choose up to " + field.max_choices + ", or none."; }
    return "Choose " + field.min_choices + " to " + field.max_choices + ".";
  }
  function buildCategory(part, described) {
    const field = part.field;
    const multiple = field.max_choices > 1;
    const rule = categoryRule(field);
    if (rule) { part.box.appendChild(el("p", { class: "field-note", id: part.key + "-rule", text: rule })); described.push(part.key + "-rule"); }
    field.choices.forEach((choice, n) => {
      const input = el("input", { type: multiple ? "checkbox" : "radio", name: part.key, value: choice.value, id: part.key + "-" + n });
      const words = el("span", {}, [document.createTextNode(choice.label),
        choice.hint ? el("span", { class: "choice-hint", text: choice.hint }) : null]);
      part.box.appendChild(el("label", { class: "choice" }, [input, words]));
    });
    const inputs = () => Array.from(part.box.querySelectorAll("input[name=" + part.key + "]"));
    part.value = () => {
      const chosen = inputs().filter((input) => input.checked).map((input) => input.value);
      // A radio group left alone is unanswered; checkboxes left alone are "none of these".
      return chosen.length === 0 && !multiple ? null : chosen;
    };
    if (multiple) {
      // At the maximum, the other boxes are disabled: one more would be refused.
      part.limit = () => {
        const full = inputs().filter((input) => input.checked).length >= field.max_choices;
        for (const input of inputs()) { input.disabled = full && !input.checked; }
      };
      part.box.addEventListener("change", part.limit);
    }
  }

  function buildText(part, described) {
    const field = part.field;
    const area = el("textarea", { id: part.key + "-text", rows: "3", maxlength: String(field.max_characters), "aria-labelledby": part.key + "-title" });
    const count = el("p", { class: "char-count", id: part.key + "-count", "aria-live": "polite" });
    const note = field.min_characters > 0 ? " (at least " + field.min_characters + ")" : "";
    function counted() { count.textContent = area.value.length + " / " + field.max_characters + " characters" + note; }
    area.addEventListener("input", counted);
    counted();
    part.box.appendChild(area);
    part.box.appendChild(count);
    described.push(part.key + "-count");
    part.value = () => (area.value.trim() === "" ? null : area.value.trim());
  }

  function buildRank(part, things, described) {
    part.box.appendChild(el("p", { class: "field-note", id: part.key + "-rule", text: "Best first: move each line up or down with its buttons." }));
    described.push(part.key + "-rule");
    const list = el("ol", { class: "rank-list", id: part.key + "-list" });
    const status = el("p", { class: "field-note", "aria-live": "polite" });
    things.forEach((label, index) => {
      const up = el("button", { type: "button", class: "move-up", "aria-label": "Move " + label + " up", text: "Move up" });
      const down = el("button", { type: "button", class: "move-down", "aria-label": "Move " + label + " down", text: "Move down" });
      const row = el("li", { "data-index": String(index) }, [el("span", { class: "rank-label", text: label }),
        el("span", { class: "rank-buttons" }, [up, down])]);
      up.addEventListener("click", () => move(row, -1, up, down));
      down.addEventListener("click", () => move(row, 1, down, up));
      list.appendChild(row);
    });
    function refresh() {
      const rows = Array.from(list.children);
      rows.forEach((row, n) => {
        row.querySelector(".move-up").disabled = n === 0;
        row.querySelector(".move-down").disabled = n === rows.length - 1;
      });
    }
    function move(row, by, pressed, other) {
      const rows = Array.from(list.children);
      const at = rows.indexOf(row) + by;
      if (at < 0 || at >= rows.length) { return; }
      part.touched = true;
      if (by < 0) { list.insertBefore(row, rows[at]); } else { list.insertBefore(rows[at], row); }
      refresh();
      status.textContent = row.querySelector(".rank-label").textContent + ": now " + (at + 1) + " of " + rows.length + ".";
      // Keep the keyboard on the moved line: the same button, or the other one at an end.
      (pressed.disabled ? other : pressed).focus();
    }
    // The start order is random: an order left as it came is no answer unless confirmed.
    const confirm = el("input", { type: "checkbox", id: part.key + "-confirm", class: "rank-confirm" });
    part.touched = false;
    refresh();
    part.box.appendChild(list);
    part.box.appendChild(status);
    part.box.appendChild(el("label", { class: "choice rank-ok", for: part.key + "-confirm" },
      [confirm, el("span", { text: "This order is right" })]));
    part.value = () => (part.touched || confirm.checked
      ? Array.from(list.children).map((row) => Number(row.dataset.index))
      : null);
  }

  // -- conditions and answers ------------------------------------------------------------
  function conditionMet(condition, values) {
    const given = values[condition.field];
    if (given === null || given === undefined) { return false; }
    if (Array.isArray(given)) { return given.some((value) => condition.in.includes(value)); }
    return condition.in.includes(given);
  }
  // The answers of the shown fields, in order: a field is shown when its condition holds on
  // the answers before it (as the server decides). Hides and shows the fieldsets.
  function answers() {
    const values = {};
    for (const part of fields) {
      const shown = !part.field.show_if || conditionMet(part.field.show_if, values);
      part.box.hidden = !shown;
      part.shown = shown;
      values[part.field.id] = shown ? part.value() : null;
    }
    return values;
  }

  function problem(part, value) {
    const field = part.field;
    if (value === null && field.required && field.type === "rank") {
      return "Move a line to put them in order, or tick \u201cThis order is right\u201d if it already is.";
    }
    if (value === null) { return field.required ? "Please answer this question." : ""; }
    if (field.type === "category" && value.length < field.min_choices) { return categoryRule(field); }
    if (field.type === "category" && value.length > field.max_choices) { return categoryRule(field); }
    if (field.type === "text" && value.length < field.min_characters) {
      return "Please write at least " + field.min_characters + " characters.";
    }
    return "";
  }

  function renderTask(task) {
    $("instructions").textContent = task.instructions || "";
    renderAttachments(task.attachments);
    const box = $("fields");
    box.replaceChildren();
    fields = task.fields.map((field, index) => build(field, index, task.attachments));
    for (const part of fields) { box.appendChild(part.box); }
    answers();
    show("task");
  }
  // A training item's feedback: per expected field, what was expected and what was given.
  function renderTraining(feedback) {
    const list = $("training-result");
    list.replaceChildren();
    const results = feedback.training === true ? feedback.fields || [] : [];
    list.hidden = results.length === 0;
    for (const result of results) {
      list.appendChild(el("li", { class: result.matched ? "matched" : "differs" }, [
        el("strong", { text: result.title }),
        el("span", { class: "verdict", text: result.matched ? " \u2714 Matches" : " \u2716 Differs" }),
        el("span", { class: "expected", text: "Expected: " + result.expected }),
        el("span", { class: "given", text: "Your answer: " + result.given }),
      ]));
    }
  }

  function render(view) {
    current = view;
    if (view.done) { $("done-message").textContent = view.message || "Done: thank you!"; show("done"); return; }
    if (view.feedback) {
      $("thanks").textContent = view.feedback.message;
      renderTraining(view.feedback);
      show("feedback"); setBusy(false);
      crowdTask.refocus($("next"));
      return;
    }
    renderTask(view.task);
    setBusy(false);
    crowdTask.refocus(document.querySelector("#fields input, #fields textarea, #fields button"));
  }

  // A question marked by a submit is unmarked as soon as its answer is fine.
  function recheck() {
    const values = answers();
    let marked = false;
    for (const part of fields) {
      if (part.error.textContent) {
        const wrong = part.shown ? problem(part, values[part.field.id]) : "";
        part.error.textContent = wrong;
        part.box.classList.toggle("invalid", Boolean(wrong));
      }
      marked = marked || Boolean(part.error.textContent);
    }
    if (!marked) { $("error").textContent = ""; }
  }
  $("fields").addEventListener("change", recheck);
  $("fields").addEventListener("input", recheck);
  $("fields").addEventListener("click", (event) => { if (event.target.matches(".rank-list button")) { recheck(); } });
  $("answer-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const values = answers();
    let first = null;
    const sent = {};
    for (const part of fields) {
      const value = values[part.field.id];
      const wrong = part.shown ? problem(part, value) : "";
      part.error.textContent = wrong;
      part.box.classList.toggle("invalid", Boolean(wrong));
      if (wrong && first === null) { first = part; }
      if (part.shown && value !== null) { sent[part.field.id] = value; }
    }
    if (first !== null) {
      $("error").textContent = "Some answers are missing or need a change: see the marked questions.";
      const target = first.box.querySelector("input:not(:disabled), textarea, button:not(:disabled)");
      if (target) { target.focus(); }
      return;
    }
    page.submit(
      () => page.post(current, "step", { step: current.task.step, fields: sent }),
      (error) => {
        if (error.status !== 422 || !error.detail) { return; }
        error.message = "The server refused an answer: " + error.detail;
        // The error names the field as "fields.<id>": mark that question as the page would.
        const id = typeof error.field === "string" && error.field.startsWith("fields.") ? error.field.slice(7) : null;
        const part = fields.find((candidate) => candidate.field.id === id);
        if (part) {
          // The server's words start with the path ("fields.<id>: ..."); the question is named.
          const own = error.field + ": ";
          part.error.textContent = error.detail.startsWith(own) ? error.detail.slice(own.length) : error.detail;
          part.box.classList.add("invalid");
          const target = part.box.querySelector("input:not(:disabled), textarea, button:not(:disabled)");
          if (target) { target.focus(); }
        }
      },
    );
  });

  page.start();
})();
