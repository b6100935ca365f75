// The Adversarial Taboo page. The player joins, asks for a game (a person or a computer
// player), waits in the waiting room if needed, then plays: the page polls its game once a
// second, so the other side's messages arrive without reloading, and each poll tells the
// server the player is still here. The defender's page never gets the secret word before
// the game is over: the server leaves it out of the defender's views.
(function () {
  "use strict";
  const $ = crowdTask.$;
  const call = crowdTask.call;
  const app = $("app");
  const studyId = app.dataset.study;
  const page = crowdTask.page({
    sections: ["join", "choose", "waiting", "game", "over", "done"],
    buttons: "button.choose, button.move, #join-button, #decline",
    render: render,
  });
  const { show, setBusy, fail } = page;
  let seat = null, game = null, timer = null;

  function poll(fn) {
    stop();
    timer = setInterval(async () => {
      try { await fn(); } catch (error) { fail(error); }
    }, 1000);
  }
  function stop() { if (timer !== null) { clearInterval(timer); timer = null; } }

  function render(view) {
    $("error").textContent = "";
    if (view.done) { stop(); $("done-message").textContent = view.message; show("done"); return; }
    if (view.seat_id !== undefined) { return renderSeat(view); }
    renderGame(view);
  }

  function renderSeat(view) {
    seat = view;
    if (view.state === "paired") { seat = null; return openGame(view.game_id); }
    if (view.state === "waiting") {
      const left = Math.max(0, Math.round((Date.parse(view.expires_at) - Date.now()) / 1000));
      $("wait-left").textContent = "(up to " + left + " s)";
      show("waiting");
      if (timer === null) { poll(async () => render(await call("GET", "/api/taboo/seats/" + seat.seat_id))); }
      return;
    }
    stop();
    $("error").textContent = view.state === "timed_out"
      ? "Nobody else came in time. Try again later, or play a computer player."
      : "";
    show("choose"); setBusy(false);
  }

  async function openGame(gameId) {
    render(await call("GET", "/api/taboo/games/" + gameId));
    poll(async () => {
      const view = await call("GET", "/api/taboo/games/" + gameId);
      if (!game || view.version !== game.version || view.over) { render(view); }
    });
  }

  function renderGame(view) {
    game = view;
    if (view.over) { return renderOver(view); }
    const attacker = view.role === "attacker";
    $("role-line").textContent = "You are the " + view.role + "; you play against "
      + view.opponent.name + ".";
    $("target-line").classList.toggle("hidden", !attacker);
    $("defender-line").classList.toggle("hidden", attacker);
    if (attacker) { $("target").textContent = view.target; }
    $("turns").textContent = String(Math.min(view.turns + 1, view.max_turns));
    $("max-turns").textContent = String(view.max_turns);
    const list = $("transcript");
    list.replaceChildren();
    for (const utterance of view.utterances) {
      const item = document.createElement("li");
      const mine = utterance.role === view.role;
      item.className = (mine ? "mine" : "theirs") + (utterance.struck || utterance.valid === false ? " struck" : "");
      item.dataset.role = utterance.role;
      item.textContent = utterance.struck ? "(a message was struck out by the rules)"
        : utterance.text + (utterance.valid === false ? " (struck: " + utterance.reasons.join(", ") + ")" : "");
      list.appendChild(item);
    }
    const finalGuess = view.phase === "final_guess";
    $("status").textContent = view.your_turn ? (finalGuess ? "the turns are up: guess the word" : "your turn")
      : (view.phase === "judging" ? "the judge is checking the last message" : "waiting for the other player");
    $("say-form").classList.toggle("hidden", finalGuess);
    $("utterance").disabled = !view.your_turn;
    $("say").disabled = !view.your_turn;
    const canGuess = !attacker && !view.guess_used;
    $("guess-form").classList.toggle("hidden", !canGuess);
    $("guess-button").disabled = !canGuess || view.phase === "judging";
    show("game");
  }

  function renderOver(view) {
    stop();
    const messages = {
      won: "You won!", lost: "You lost this one.", tie: "A tie: nobody won.",
      left: "You left the game.", partner_left: "The other player left the game: it ends here, with no winner.",
    };
    $("result").textContent = messages[view.result] || "Game over.";
    $("revealed").textContent = view.target;
    show("over");
    setBusy(false);
    if (view.completion) { page.submit(async () => ({ done: true, message: messages[view.result], completion: view.completion })); }
  }

  async function move(body) {
    setBusy(true);
    try {
      render(await call("POST", "/api/taboo/games/" + game.game_id + "/move", Object.assign({ version: game.version }, body)));
      setBusy(false);
      return true;
    } catch (error) { fail(error); return false; }
  }

  async function ask(opponent) {
    setBusy(true);
    try { render(await call("POST", "/api/taboo/studies/" + studyId + "/lobby", { opponent: opponent })); }
    catch (error) { fail(error); }
  }

  $("say-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await move({ say: $("utterance").value })) { $("utterance").value = ""; }
  });
  $("guess-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    await move({ guess: $("guess").value });
  });
  $("play-human").addEventListener("click", () => ask("human"));
  $("play-agent").addEventListener("click", () => ask("agent"));
  $("leave-seat").addEventListener("click", async () => {
    if (seat) { stop(); render(await call("POST", "/api/taboo/seats/" + seat.seat_id + "/leave", {})); }
  });
  $("leave-game").addEventListener("click", async () => {
    if (game) { render(await call("POST", "/api/taboo/games/" + game.game_id + "/leave", {})); }
  });
  $("next").addEventListener("click", () => { game = null; show("choose"); setBusy(false); });
  // After the intro (and joining, on the open web): choose whom to play against.
  page.start(async () => { show("choose"); setBusy(false); });
})();
