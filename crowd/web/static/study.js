// The study page of the experimenter's app: its progress numbers refresh every few seconds
// from /dashboard/studies/<id>/live, and buttons that end a study ask first.
(function () {
  "use strict";
  const section = document.getElementById("progress");
  const PERIOD_MS = 3000;

  function pick(data, path) {
    return path.split(".").reduce((value, key) => (value == null ? undefined : value[key]), data);
  }
  async function refresh() {
    try {
      const response = await fetch(section.dataset.live, { credentials: "same-origin" });
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      const data = await response.json();
      for (const cell of section.querySelectorAll("[data-live-key]")) {
        const value = pick(data, cell.dataset.liveKey);
        cell.textContent = value == null ? (cell.dataset.liveKey === "report_updated_at" ? "not yet" : "0") : String(value);
      }
      document.getElementById("complete-bar").value = data.progress.fraction_complete;
      document.getElementById("live-note").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (error) {
      document.getElementById("live-note").textContent = "could not update (" + error.message + "): retrying";
    }
  }
  if (section) { setInterval(refresh, PERIOD_MS); }

  for (const button of document.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) { event.preventDefault(); }
    });
  }
})();
