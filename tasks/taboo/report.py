"""Render an Adversarial Taboo analysis as a PNG plot and one self-contained HTML page."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

# Figure is used directly (never pyplot) so rendering touches no global state and needs no
# display; savefig then picks the Agg canvas for PNG on its own.
from matplotlib.figure import Figure

from tasks.report_html import (
    dec,
    embed_figures,
    esc,
    integer,
    no_data,
    page,
    pct,
    style,
    table,
)
from tasks.taboo.analysis import OUTCOMES, REFERENCE

PLOT_FILES: dict[str, str] = {"outcomes": "outcomes_by_pairing.png"}
OUTCOME_LABELS: dict[str, str] = {"attacker": "Attacker wins", "defender": "Defender wins",
                                  "tie": "Ties"}  # fmt: skip
OUTCOME_COLORS: dict[str, str] = {"attacker": "#cf222e", "defender": "#1f6feb", "tie": "#9aa5b1"}
MAX_WORD_ROWS = 500
MAX_PLAYER_ROWS = 500
STYLE = style(max_width="75rem")

Section = Mapping[str, Any]
OUTCOME_HEADER = [
    "games", "abandoned", "scored", "attacker wins", "defender wins", "ties", "mean turns",
    "sd turns",
]  # fmt: skip


def _outcome_cells(block: Section) -> list[str]:
    rates = block.get("rates") or {}
    turns = block.get("turns") or {}
    return [
        integer(block.get("n_games", 0)),
        integer(block.get("n_abandoned", 0)),
        integer(block.get("n_scored", 0)),
        *(pct(rates.get(name)) for name in OUTCOMES),
        dec(turns.get("mean")),
        dec(turns.get("std")),
    ]


def _sets(data: Section) -> list[tuple[str, Section]]:
    sets: list[tuple[str, Section]] = [("Full set", data.get("full") or {})]
    if data.get("filtered") is not None:
        sets.append(("Filtered set", data["filtered"]))
    return sets


def _plot_outcomes(sets: Sequence[tuple[str, Section]]) -> Figure:
    """Outcome rates per pairing, one panel per set, with the paper's two conditions."""
    fig = Figure(figsize=(8, 3.6 * len(sets)), layout="tight")
    title = "Outcome rates per pairing (finished, non-abandoned games)"
    if not any((part.get("n_scored") or 0) for _, part in sets):
        no_data(fig, title)
        return fig
    reference = [
        (
            f"paper, agent vs human:\n{c['condition'].replace('humans ', '')}",
            c["rates"],
            c["n_games"],
        )
        for c in REFERENCE["conditions"]
    ]
    for index, (label, part) in enumerate(sets, start=1):
        ax = fig.add_subplot(len(sets), 1, index)
        groups = [
            (pairing, block.get("rates") or {}, block.get("n_scored") or 0)
            for pairing, block in (part.get("by_pairing") or {}).items()
            if block.get("n_scored")
        ]
        groups += reference
        width = 0.26
        for offset, name in zip((-width, 0.0, width), OUTCOMES, strict=True):
            heights = [100 * float(rates.get(name) or 0.0) for _, rates, _ in groups]
            bars = ax.bar(
                [x + offset for x in range(len(groups))],
                heights,
                width=width,
                color=OUTCOME_COLORS[name],
                label=OUTCOME_LABELS[name],
            )
            for bar, (group, _, _) in zip(bars, groups, strict=True):
                if group.startswith("paper"):
                    bar.set_hatch("//")
                    bar.set_alpha(0.6)
        ax.set_xticks(
            range(len(groups)), labels=[f"{group}\n(n={n})" for group, _, n in groups], fontsize=8
        )
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of scored games")
        ax.set_title(f"{title}: {label}")
        ax.legend(fontsize=8)
    return fig


def _counts_table(sets: Sequence[tuple[str, Section]]) -> str:
    keys = (
        ("Game records", "n_records"),
        ("Running (not analysed)", "n_running"),
        ("Finished", "n_games"),
        ("Abandoned (left or timed out)", "n_abandoned"),
        ("Scored (finished, not abandoned)", "n_scored"),
    )
    rows = [[label, *(integer(part.get(key)) for _, part in sets)] for label, key in keys]
    rows.append(
        [
            "Games with an excluded player (flagged / left out)",
            *(
                f"{integer((part.get('excluded') or {}).get('n_games', 0))} / "
                f"{'yes' if (part.get('excluded') or {}).get('left_out') else 'no'}"
                for _, part in sets
            ),
        ]
    )
    return table(["Count", *(name for name, _ in sets)], rows, table_id="counts")


def _overall_table(sets: Sequence[tuple[str, Section]]) -> str:
    rows = [[name, *_outcome_cells(part)] for name, part in sets]
    return table(["Set", *OUTCOME_HEADER], rows, table_id="overall")


def _reference_table(sets: Sequence[tuple[str, Section]]) -> str:
    rows = [
        [
            f"Paper: {c['condition']}",
            integer(c["n_games"]),
            *(pct(c["rates"][name]) for name in OUTCOMES),
            dec(c["mean_turns"]),
        ]
        for c in REFERENCE["conditions"]
    ]
    for name, part in sets:
        block = part.get("agent_attacker_vs_human_defender") or {}
        rates = block.get("rates") or {}
        rows.append(
            [
                f"This study, agent attacker vs human defender ({name.lower()})",
                integer(block.get("n_scored", 0)),
                *(pct(rates.get(outcome)) for outcome in OUTCOMES),
                dec((block.get("turns") or {}).get("mean")),
            ]
        )
    header = ["", "games", "attacker wins", "defender wins", "ties", "mean turns"]
    return table(header, rows, table_id="reference")


def _slug(set_name: str) -> str:
    return set_name.split()[0].lower()


def _grouped_table(groups: Mapping[str, Section], label: str, table_id: str) -> str:
    rows = [[name, *_outcome_cells(block)] for name, block in list(groups.items())[:MAX_WORD_ROWS]]
    return table([label, *OUTCOME_HEADER], rows, table_id=table_id)


def _word_table(part: Section, table_id: str) -> str:
    rows = [
        [word, dec(block.get("concreteness")), *_outcome_cells(block)]
        for word, block in list((part.get("by_word") or {}).items())[:MAX_WORD_ROWS]
    ]
    return table(["Word", "concreteness", *OUTCOME_HEADER], rows, table_id=table_id)


def _turns_table(sets: Sequence[tuple[str, Section]]) -> str:
    rows = []
    for name, part in sets:
        by_outcome = part.get("turns_by_outcome") or {}
        for outcome in OUTCOMES:
            entry = by_outcome.get(outcome) or {}
            rows.append(
                [
                    name,
                    OUTCOME_LABELS[outcome],
                    integer(entry.get("n", 0)),
                    dec(entry.get("mean")),
                    dec(entry.get("std")),
                ]
            )
    return table(["Set", "Outcome", "games", "mean turns", "sd"], rows, table_id="turns")


def _abandoned_table(sets: Sequence[tuple[str, Section]]) -> str:
    rows = []
    for name, part in sets:
        entry = part.get("abandoned") or {}
        reasons = ", ".join(f"{r}: {n}" for r, n in (entry.get("by_reason") or {}).items())
        roles = ", ".join(f"{r}: {n}" for r, n in (entry.get("by_role") or {}).items())
        rows.append([name, integer(entry.get("n", 0)), reasons or "none", roles or "none"])
    return table(["Set", "abandoned", "by reason", "left by"], rows, table_id="abandoned")


def _guess_table(sets: Sequence[tuple[str, Section]]) -> str:
    rows = []
    for name, part in sets:
        g = part.get("guesses") or {}
        rows.append(
            [
                name,
                integer(g.get("n_games", 0)),
                integer(g.get("n_guessed", 0)),
                f"{integer(g.get('n_early', 0))} ({pct(g.get('early_share'))})",
                f"{integer(g.get('n_forced', 0))} ({pct(g.get('forced_share'))})",
                pct(g.get("accuracy")),
                pct(g.get("early_accuracy")),
                pct(g.get("forced_accuracy")),
                dec((g.get("early_guess_turn") or {}).get("mean")),
            ]
        )
    header = [
        "Set", "scored games", "guesses", "early", "forced at the end", "accuracy",
        "early accuracy", "forced accuracy", "mean turn of early guesses",
    ]  # fmt: skip
    return table(header, rows, table_id="guesses")


def _utterance_tables(sets: Sequence[tuple[str, Section]]) -> str:
    counts = []
    reasons = []
    checks = []
    scores = []
    for name, part in sets:
        u = part.get("utterances") or {}
        by_role = u.get("invalid_by_role") or {}
        counts.append(
            [
                name,
                integer(u.get("n_utterances", 0)),
                integer(u.get("n_invalid", 0)),
                pct(u.get("invalid_share")),
                integer(by_role.get("attacker", 0)),
                integer(by_role.get("defender", 0)),
            ]
        )
        for reason, entry in (u.get("invalid_by_reason") or {}).items():
            reasons.append([name, reason, integer(entry.get("n")), pct(entry.get("share"))])
        for check, entry in (u.get("judge_checks") or {}).items():
            checks.append(
                [
                    name,
                    check,
                    integer(entry.get("n_checked")),
                    integer(entry.get("n_failed")),
                    pct(entry.get("fail_rate")),
                ]
            )
        for check, entry in (part.get("judge_scores") or {}).items():
            scores.append(
                [
                    name,
                    check,
                    integer(entry.get("n")),
                    dec(entry.get("mean"), 3),
                    dec(entry.get("std"), 3),
                    dec(entry.get("median"), 3),
                    ", ".join(f"{t:g}" for t in entry.get("thresholds") or []) or "n/a",
                    ", ".join(entry.get("models") or []) or "n/a",
                ]
            )
    return "".join(
        [
            table(
                ["Set", "utterances", "invalid", "share", "by attackers", "by defenders"],
                counts,
                table_id="invalid",
            ),
            table(["Set", "reason", "invalid utterances", "share"], reasons, table_id="reasons"),
            table(
                ["Set", "judge check", "checked", "failed", "fail rate"],
                checks,
                table_id="judge-checks",
            ),
            table(
                ["Set", "judge check", "scores", "mean", "sd", "median", "thresholds", "models"],
                scores,
                table_id="judge-scores",
            ),
        ]
    )


def _concreteness_table(sets: Sequence[tuple[str, Section]]) -> str:
    rows = []
    for name, part in sets:
        entry = part.get("concreteness") or {}
        for key, label in (
            ("attacker_win_rate", "attacker-win rate"),
            ("mean_turns", "mean turns"),
        ):
            corr = entry.get(key) or {}
            rows.append(
                [
                    name,
                    label,
                    integer(corr.get("n", 0)),
                    dec(corr.get("rho"), 3),
                    "n/a" if corr.get("p") is None else f"{float(corr['p']):.3g}",
                    str(corr.get("reason") or ""),
                ]
            )
    header = ["Set", "concreteness vs", "words", "Spearman rho", "p", "note"]
    return table(header, rows, table_id="concreteness")


def _leaderboard_table(rows: Sequence[Section]) -> str:
    cells = [
        [
            integer(row.get("rank")),
            str(row.get("name")),
            str(row.get("kind")),
            integer(row.get("games")),
            f"{integer(row.get('attacker_played'))} / {integer(row.get('attacker_won'))}",
            f"{integer(row.get('defender_played'))} / {integer(row.get('defender_won'))}",
            integer(row.get("ties")),
            integer(row.get("abandoned")),
            dec(row.get("points"), 1),
            pct(row.get("win_rate")),
        ]
        for row in rows[:MAX_PLAYER_ROWS]
    ]
    header = [
        "Rank", "Player", "kind", "games", "as attacker (played / won)",
        "as defender (played / won)", "ties", "left", "points", "win rate",
    ]  # fmt: skip
    return table(header, cells, table_id="leaderboard")


def render_report(data: dict[str, Any], out_dir: pathlib.Path, title: str) -> str:
    """Write the PNG plot into out_dir and return the HTML report with it embedded.

    `data` holds "full" (`analyze(games, filtered=False)`), optionally "filtered"
    (`analyze(games)`) and "leaderboard" (`leaderboard(games)`), each shown when present.
    """
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sets = _sets(data)
    images = embed_figures({"outcomes": _plot_outcomes(sets)}, out_dir, PLOT_FILES)
    body = [
        "<h2>Games</h2>",
        "<p>Rates and turn means are over the scored games: finished and not abandoned. A game "
        "a player left or timed out of is counted as abandoned and nobody wins it. The filtered "
        "set leaves out games in which a QC-excluded or blocked worker played.</p>",
        _counts_table(sets),
        "<h2>Outcomes</h2>",
        _overall_table(sets),
        "<h2>Reference numbers</h2>",
        f"<p>{esc(REFERENCE['source'])}: {esc(REFERENCE['setting'])}.</p>",
        _reference_table(sets),
        "<h2>Turns to each outcome</h2>",
        _turns_table(sets),
        "<h2>Abandoned games</h2>",
        _abandoned_table(sets),
        "<h2>Per pairing</h2>",
    ]
    for name, part in sets:
        body += [
            f"<h3>{esc(name)}</h3>",
            _grouped_table(part.get("by_pairing") or {}, "Pairing", f"pairing-{_slug(name)}"),
        ]
    body.append("<h2>Per matchup</h2>")
    for name, part in sets:
        body += [
            f"<h3>{esc(name)}</h3>",
            _grouped_table(
                part.get("by_matchup") or {}, "Attacker vs defender", f"matchup-{_slug(name)}"
            ),
        ]
    body.append("<h2>Per target word</h2>")
    for name, part in sets:
        body += [f"<h3>{esc(name)}</h3>", _word_table(part, f"words-{_slug(name)}")]
    body += [
        "<h2>Word concreteness</h2>",
        "<p>Spearman's rank correlation over the words that have a concreteness and a scored "
        "game: concreteness against each word's attacker-win rate and mean turns.</p>",
        _concreteness_table(sets),
        "<h2>Defender guesses</h2>",
        "<p>Early: the defender chose to guess before the turns ran out; forced: it guessed "
        "with every turn used.</p>",
        _guess_table(sets),
        "<h2>Invalid utterances and the judge</h2>",
        "<p>Over every finished game, abandoned ones included. An utterance may have several "
        "reasons. Judge checks count wherever a verdict was recorded, enforced or not; the "
        "fluency score is a perplexity (lower is better), the relevance score a probability.</p>",
        _utterance_tables(sets),
        "<h2>Plots</h2>",
        *images,
    ]
    if data.get("leaderboard") is not None:
        body += [
            "<h2>Leaderboard</h2>",
            "<p>A win is 1 point, a tie 0.5, a loss or a game the player left 0. A game left by "
            "one player counts against that player only.</p>",
            _leaderboard_table(data["leaderboard"]),
        ]
    return page(title, body, STYLE)
