// The reviewer's action forms: the button waits for an action to be chosen, says what comes
// next, and only the fields the chosen action takes are shown. Without this script the forms
// still hold: the menu is required, the server refuses a form without an action, and reject,
// soft-reject and block are confirmed on a page of their own.
(function () {
  "use strict";
  var NEXT = {
    none: "Choose an action in the menu first.",
    confirm: "The next page shows what this does; nothing happens until you confirm there.",
    apply: "This takes effect when you press Apply.",
  };
  document.querySelectorAll("form.act").forEach(function (form) {
    var menu = form.querySelector("select[name=action]");
    var button = form.querySelector("button[type=submit]");
    var next = form.querySelector(".next");
    if (!menu || !button) return;
    function update() {
      var chosen = menu.value !== "";
      var confirm = chosen && menu.selectedOptions[0].hasAttribute("data-confirm");
      button.disabled = !chosen;
      button.textContent = !chosen ? "Choose an action first" : confirm ? "Review and confirm…" : "Apply";
      button.className = confirm ? "warn" : "primary";
      if (next) next.textContent = NEXT[!chosen ? "none" : confirm ? "confirm" : "apply"];
      form.querySelectorAll("[data-for]").forEach(function (field) {
        field.hidden = field.getAttribute("data-for").split(" ").indexOf(menu.value) < 0;
      });
    }
    menu.addEventListener("change", update);
    update();
  });
})();
