"""The Adversarial Taboo part of `crowd demo` (crowd.demo runs every live package's demo).

One simulated person defends against the retrieval attacker through the HTTP game API, and
an agent-vs-agent tournament over the word list goes on the models queue; afterwards the
outcome rates by pairing are printed next to the paper's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from crowd.accounts import authenticate
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Database
from crowd.studies.lifecycle import create_study, get_study, import_items
from tasks.taboo.live import records as taboo_records
from tasks.taboo.live.jobs import enqueue_tournament
from tasks.taboo.live.sim import SimulatedPlayer

TOURNAMENT = "demo"


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _num(value: Any, fmt: str = ".2f") -> str:
    return "n/a" if value is None else format(value, fmt)


def start(
    settings: Settings,
    db: Database,
    api_key: str,
    url: str,
    seed: int,
    echo: Callable[[str], Any],
    records: list[dict[str, Any]],
) -> int:
    """An Adversarial Taboo study over `records` (the sample words): one simulated person
    defends against the agent attacker through HTTP at `url`, and an agent-vs-agent
    tournament goes on the queue. Returns the study's id."""
    words = records
    with db.session() as session:
        experimenter = authenticate(session, api_key)
        config = {"taboo": {"human_role": "defender",
                            "judge": {"relevance_model": "minilm", "relevance_threshold": 0.4}}}
        study = create_study(session, experimenter, "Adversarial Taboo demo", "taboo", config)
        import_items(session, study, words)
        open_study(session, study, ["local", "sim"])
        study_id = study.id
    echo(f"study {study_id} (taboo): {len(words)} target words")
    view = SimulatedPlayer(url, api_key, "sim-taboo-person", seed=seed).play(study_id)
    echo(
        f"taboo: a simulated person defended against the retrieval attacker: "
        f"{view['result']} after {view['turns']} turns ({view['end_reason']}; "
        f"the word was {view['target']!r})"
    )
    assert settings.redis_url is not None
    connection = redis.Redis.from_url(settings.redis_url)
    try:
        enqueue_tournament(
            connection, study_id=study_id, name=TOURNAMENT, attackers=["retrieval"],
            defenders=["threshold", "naive"], games_per_pair=1, seed=seed,
        )  # fmt: skip
    finally:
        connection.close()
    echo("taboo: an agent-vs-agent tournament is queued (retrieval vs threshold and naive)")
    return study_id


def lines(settings: Settings, study_id: int) -> list[str]:
    """Outcome rates of the taboo demo study, by pairing, with the paper's reference."""
    db = Database(settings.database_url)
    try:
        with db.session() as session:
            data = taboo_records.summary(session, get_study(session, study_id))
    finally:
        db.dispose()
    full = data["full"]
    out = [f"\n== study {study_id}: Adversarial Taboo demo (taboo)"]
    for pairing, numbers in full["by_pairing"].items():
        if numbers["n_games"]:
            out.append(f"{pairing}: {_rates(numbers)}")
    for matchup, numbers in full["by_matchup"].items():
        out.append(f"  {matchup}: {_rates(numbers)}")
    for condition in full["reference"]["conditions"]:
        rates = condition["rates"]
        out.append(
            f"  paper, agent attacker vs {condition['condition']}: attacker / defender / tie "
            f"{_pct(rates['attacker'])} / {_pct(rates['defender'])} / {_pct(rates['tie'])}, "
            f"mean turns {condition['mean_turns']}"
        )
    rho = (full.get("concreteness") or {}).get("attacker_win_rate") or {}
    if rho.get("rho") is not None:
        out.append(
            f"word concreteness vs attacker wins: Spearman rho {_num(rho['rho'])} "
            f"(p {_num(rho.get('p'), '.3f')}, {full['concreteness']['n_words']} words)"
        )
    report = settings.reports_dir / f"study-{study_id}"
    out.append(f"report: {report / 'report.html'}")
    return out


def _rates(numbers: dict[str, Any]) -> str:
    rates = numbers["rates"]
    return (
        f"{numbers['n_games']} games, attacker / defender / tie {_pct(rates['attacker'])} / "
        f"{_pct(rates['defender'])} / {_pct(rates['tie'])}, mean turns "
        f"{_num(numbers['turns']['mean'])}"
    )
