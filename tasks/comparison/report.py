"""Render a comparison analysis as PNG plots and one self-contained HTML page."""

from __future__ import annotations

import pathlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

# Figure is used directly (never pyplot) so rendering touches no global state and needs no
# display; savefig then picks the Agg canvas for PNG on its own.
from matplotlib.figure import Figure

from tasks.base import rater_group
from tasks.report_html import (
    RULE_HEADER,
    embed_figures,
    esc,
    exclusions_by_group,
    integer,
    names,
    no_data,
    page,
    pct,
    rule_rows,
    style,
    table,
)

PLOT_FILES: dict[str, str] = {
    "agreement": "agreement.png",
    "win_rates": "win_rates.png",
    "position": "position_bias.png",
}
SETS: tuple[tuple[str, str, str], ...] = (
    ("full", "Full set", "#9aa5b1"),
    ("filtered", "Filtered set", "#1f6feb"),
)
AGREEMENT_ROWS: tuple[tuple[str, str], ...] = (
    ("worker_worker", "Worker - worker"),
    ("expert_worker", "Expert - worker"),
    ("expert_expert", "Expert - expert"),
)
MAX_WORKER_ROWS = 500
STYLE = style(max_width="75rem")

Section = Mapping[str, Any]


def _ci(entry: Section) -> str:
    low, high = entry.get("ci_low"), entry.get("ci_high")
    if low is None or high is None:
        return "n/a"
    return f"{100 * float(low):.1f}-{100 * float(high):.1f}%"


def _errors(entries: Sequence[Section], key: str = "rate") -> tuple[list[float], list[float]]:
    """Distances from the value down to ci_low and up to ci_high (0 where no interval)."""
    below, above = [], []
    for entry in entries:
        value, low, high = entry.get(key), entry.get("ci_low"), entry.get("ci_high")
        if value is None or low is None or high is None:
            below.append(0.0)
            above.append(0.0)
            continue
        below.append(100 * (float(value) - float(low)))
        above.append(100 * (float(high) - float(value)))
    return below, above


def _plot_agreement(full: Section, filtered: Section) -> Figure:
    fig = Figure(figsize=(7, 4), layout="tight")
    title = "Agreement on the same item (95% cluster-bootstrap CI)"
    parts = {"full": full.get("agreement") or {}, "filtered": filtered.get("agreement") or {}}
    if not any(
        (parts[name].get(key) or {}).get("n_pairs") for name in parts for key, _ in AGREEMENT_ROWS
    ):
        no_data(fig, title)
        return fig
    ax = fig.add_subplot()
    xs = list(range(len(AGREEMENT_ROWS)))
    width = 0.38
    for offset, (name, label, color) in zip((-width / 2, width / 2), SETS, strict=True):
        entries = [parts[name].get(key) or {} for key, _ in AGREEMENT_ROWS]
        heights = [100 * float(e["rate"]) if e.get("rate") is not None else 0.0 for e in entries]
        ax.bar(
            [x + offset for x in xs],
            heights,
            width=width,
            color=color,
            label=label,
            yerr=_errors(entries),
            capsize=4,
        )
        for x, entry in zip(xs, entries, strict=True):
            if entry.get("rate") is None:
                ax.text(x + offset, 2, "no pairs", ha="center", rotation=90, fontsize=8)
    chance = (parts["full"].get("chance") or {}).get("rate")
    if chance is not None:
        ax.axhline(100 * float(chance), color="black", linestyle=":", label="chance (1/K)")
    ax.set_xticks(xs, labels=[label for _, label in AGREEMENT_ROWS])
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of label pairs that agree")
    ax.set_title(title)
    ax.legend()
    return fig


def _plotted_wins(part: Section) -> list[Section]:
    """Win-rate entries, without the "all K" entry of a pair seen at one K (the same numbers)."""
    entries: list[Section] = list(part.get("win_rates") or [])
    ks = Counter((e["policy_a"], e["policy_b"]) for e in entries if e["k"] != "all")
    return [e for e in entries if e["k"] != "all" or ks[(e["policy_a"], e["policy_b"])] > 1]


def _plot_win_rates(full: Section, filtered: Section) -> Figure:
    fig = Figure(figsize=(7, 4), layout="tight")
    title = "Win rate of policy A (majority of crowd labels, 95% exact CI)"
    series = {
        name: [e for e in _plotted_wins(part) if e.get("win_rate_a") is not None]
        for name, part in (("full", full), ("filtered", filtered))
    }
    names = list(
        dict.fromkeys(
            f"{e['policy_a']} vs {e['policy_b']}, K={e['k']}"
            for entries in series.values()
            for e in entries
        )
    )
    if not names:
        no_data(fig, title)
        return fig
    ax = fig.add_subplot()
    for shift, (name, label, color) in zip((-0.12, 0.12), SETS, strict=True):
        entries = {f"{e['policy_a']} vs {e['policy_b']}, K={e['k']}": e for e in series[name]}
        present = [n for n in names if n in entries]
        if not present:
            continue
        chosen = [entries[n] for n in present]
        ax.errorbar(
            [names.index(n) + shift for n in present],
            [100 * float(e["win_rate_a"]) for e in chosen],
            yerr=_errors(chosen, "win_rate_a"),
            fmt="o",
            capsize=4,
            color=color,
            label=label,
        )
    ax.axhline(50, color="black", linestyle=":", linewidth=0.8)
    ax.set_xticks(range(len(names)), labels=names, rotation=15, ha="right")
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of decided items won by A")
    ax.set_title(title)
    ax.legend()
    return fig


def _plot_position(full: Section, filtered: Section) -> Figure:
    fig = Figure(figsize=(7, 4), layout="tight")
    title = "Picks by displayed position (position bias)"
    sets = [
        (label, color, part.get("position_bias") or {})
        for (_, label, color), part in zip(SETS, (full, filtered), strict=True)
    ]
    if not any(bias for _, _, bias in sets):
        no_data(fig, title)
        return fig
    ax = fig.add_subplot()
    styles = ("o-", "s--", "^-.", "d:")
    max_k = 0
    for label, color, bias in sets:
        for index, (k, entry) in enumerate(sorted(bias.items(), key=lambda pair: int(pair[0]))):
            shares = [100 * float(s) if s is not None else 0.0 for s in entry["shares"]]
            max_k = max(max_k, len(shares))
            ax.plot(
                range(len(shares)),
                shares,
                styles[index % len(styles)],
                color=color,
                label=f"{label}, K={k} (n={entry['n']})",
            )
    for k in sorted({int(k) for _, _, bias in sets for k in bias}):
        ax.hlines(100 / k, -0.2, k - 0.8, colors="black", linestyles=":", linewidth=0.8)
    ax.set_xticks(range(max_k))
    ax.set_xlabel("displayed position (0 = first shown)")
    ax.set_ylabel("% of picks (dotted: chance, 1/K)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend()
    return fig


def _agreement_table(full: Section, filtered: Section) -> str:
    rows = []
    parts = (full.get("agreement") or {}, filtered.get("agreement") or {})
    chance = [part.get("chance") or {} for part in parts]
    rows.append(
        ["Chance (1/K)", names(chance[0].get("rater_groups"))]
        + [cell for c in chance for cell in (pct(c.get("rate")), "", integer(c.get("n_items")), "")]
    )
    for key, label in AGREEMENT_ROWS:
        cells = [label, names((parts[0].get(key) or {}).get("rater_groups"))]
        for part in parts:
            entry = part.get(key) or {}
            cells += [
                pct(entry.get("rate")),
                _ci(entry),
                integer(entry.get("n_items", 0)),
                integer(entry.get("n_pairs", 0)),
            ]
        rows.append(cells)
    header = ["Agreement", "rater groups"] + [
        f"{column} ({name})"
        for name in ("full", "filtered")
        for column in ("rate", "95% CI", "items", "pairs")
    ]
    return table(header, rows, table_id="agreement")


def _agreement_by_group_table(full: Section, filtered: Section) -> str:
    """Agreement within and between every two rater groups, full and filtered set."""
    keyed = [
        {(e["group_a"], e["group_b"]): e for e in part.get("agreement_by_group") or []}
        for part in (full, filtered)
    ]
    rows = []
    for pair in dict.fromkeys([*keyed[0], *keyed[1]]):
        cells = [pair[0] if pair[0] == pair[1] else f"{pair[0]} - {pair[1]}"]
        for entries in keyed:
            entry = entries.get(pair) or {}
            cells += [pct(entry.get("rate")), _ci(entry), integer(entry.get("n_pairs", 0))]
        rows.append(cells)
    header = ["Rater groups"] + [
        f"{column} ({name})"
        for name in ("full", "filtered")
        for column in ("rate", "95% CI", "pairs")
    ]
    return table(header, rows, table_id="agreement-by-group")


def _win_table(part: Section, by_group: bool = False, table_id: str = "") -> str:
    entries: list[Section] = (
        [e for group in (part.get("win_rates_by_group") or {}).values() for e in group]
        if by_group
        else list(part.get("win_rates") or [])
    )
    rows = [
        [
            names(e.get("rater_groups")),
            f"{e['policy_a']} vs {e['policy_b']}",
            str(e["k"]),
            integer(e["n_items"]),
            integer(e["wins_a"]),
            integer(e["wins_b"]),
            integer(e["ties"]),
            pct(e.get("win_rate_a")),
            _ci(e),
            ", ".join(f"{n}: {c}" for n, c in (e.get("labels_per_item") or {}).items()),
        ]
        for e in entries
    ]
    header = [
        "Majority of", "Policies (A vs B)", "K", "items", "wins A", "wins B", "ties",
        "win rate A", "95% CI", "labels per item (labels: items)",
    ]  # fmt: skip
    return table(header, rows, table_id=table_id)


def _counts_table(full: Section, filtered: Section) -> str:
    keys = (
        ("Labels (real and gold)", "n_labels"),
        ("Crowd labels", "n_crowd_labels"),
        ("Expert labels (imported)", "n_expert_labels"),
        ("Crowd workers", "n_workers"),
        ("Items", "n_items"),
        ("Gold items (experimenter label)", "n_gold_items"),
        ("Crowd labels on gold items", "n_gold_labels"),
    )
    rows = [[label, integer(full.get(key)), integer(filtered.get(key))] for label, key in keys]
    rows.append(
        [
            "Crowd accuracy on gold",
            pct(full.get("gold_accuracy")),
            pct(filtered.get("gold_accuracy")),
        ]
    )
    return table(["Count", "Full set", "Filtered set"], rows)


def _groups_table(full: Section, filtered: Section) -> str:
    """Each rater group's labels, raters, items and gold accuracy, full and filtered set."""
    parts = (full.get("by_rater_group") or {}, filtered.get("by_rater_group") or {})
    rows = []
    for group in dict.fromkeys([*parts[0], *parts[1]]):
        a, b = parts[0].get(group) or {}, parts[1].get(group) or {}
        rows.append(
            [
                group,
                "expert" if (a or b).get("expert") else "worker",
                f"{integer(a.get('n_labels', 0))} / {integer(b.get('n_labels', 0))}",
                f"{integer(a.get('n_raters', 0))} / {integer(b.get('n_raters', 0))}",
                f"{integer(a.get('n_items', 0))} / {integer(b.get('n_items', 0))}",
                f"{pct(a.get('gold_accuracy'))} / {pct(b.get('gold_accuracy'))}",
            ]
        )
    header = [
        "Rater group", "role", "labels (full / filtered)", "raters", "items",
        "accuracy on gold",
    ]  # fmt: skip
    return table(header, rows, table_id="rater-groups")


def _worker_table(part: Section) -> str:
    rows = [
        [
            w["worker"],
            rater_group(w),
            integer(w["labels"]),
            f"{pct(w.get('worker_agreement'))} ({integer(w.get('worker_pairs'))})",
            f"{pct(w.get('expert_agreement'))} ({integer(w.get('expert_pairs'))})",
            pct(w.get("gold_accuracy")),
            f"{pct(w.get('first_share'))} (chance {pct(w.get('first_chance'))})",
        ]
        for w in (part.get("workers") or [])[:MAX_WORKER_ROWS]
    ]
    header = [
        "Worker", "rater group", "labels", "agreement within the group (pairs)",
        "agreement with experts (pairs)", "gold accuracy", "picks of the first shown",
    ]  # fmt: skip
    return table(header, rows, table_id="workers")


def render_report(data: dict[str, Any], out_dir: pathlib.Path, title: str) -> str:
    """Write the PNG plots into out_dir and return the HTML report with them embedded."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    full: Section = data.get("full") or {}
    filtered: Section = data.get("filtered") or {}
    attention: Section = data.get("attention") or {}
    training: Section = data.get("training") or {}
    excluded: Section = data.get("excluded") or {}
    rules: Section = data.get("rules") or {}

    figures = {
        "agreement": _plot_agreement(full, filtered),
        "win_rates": _plot_win_rates(full, filtered),
        "position": _plot_position(full, filtered),
    }
    images = embed_figures(figures, out_dir, PLOT_FILES)

    caught = names(attention.get("failed_workers"))
    quality = (
        f"<p>{esc(integer(attention.get('n_checks', 0)))} attention checks answered, "
        f"{esc(integer(attention.get('n_failed_checks', 0)))} failed; "
        f"{esc(integer(attention.get('workers_failed', 0)))} of "
        f"{esc(integer(attention.get('workers_checked', 0)))} checked workers failed at least one "
        f"({esc(pct(attention.get('worker_failure_rate')))}). "
        f"Workers caught: {esc(caught)}.</p>"
        f"<p>Training examples: {esc(integer(training.get('n_labels', 0)))} answers by "
        f"{esc(integer(training.get('n_workers', 0)))} workers matched the experimenter "
        f"{esc(pct(training.get('accuracy')))} of the time.</p>"
        f"<p>The filtered set leaves out {esc(integer(excluded.get('n_workers', 0)))} workers "
        f"and {esc(integer(excluded.get('n_responses', 0)))} responses (QC judges live workers "
        "and the raters of imported answers alike).</p>"
        + exclusions_by_group(data)
        + (table(RULE_HEADER, rule_rows(rules)) if rules else "")
    )
    experts = names(data.get("expert_groups"))
    groups = names(full.get("rater_groups"))
    body = [
        "<h2>Quality control</h2>",
        quality,
        "<h2>Counts</h2>",
        f"<p>Rater groups: {esc(groups)}. The crowd counts and its accuracy on gold are the "
        "rater group crowd's; the table by rater group gives every group's.</p>",
        _counts_table(full, filtered),
        _groups_table(full, filtered),
        "<h2>Agreement</h2>",
        f"<p>Share of label pairs on the same item that pick the same candidate. As in the "
        f"paper, workers are the rater group crowd; experts are the rater groups {esc(experts)} "
        "and the experimenter's label on gold items; each row names the groups it uses. "
        "Intervals resample whole items, since the pairs of one item share labels.</p>",
        _agreement_table(full, filtered),
        "<h3>By rater group</h3>",
        "<p>Within each rater group and between every two (the experimenter's gold labels as "
        "the group experimenter).</p>",
        _agreement_by_group_table(full, filtered),
        "<h2>Model-vs-model win rates</h2>",
        "<p>Items whose candidates come from two policies, half each; the winner is the policy "
        "most raters of the group picked (ties are left out of the rate). Clopper-Pearson 95% "
        "CI. First by the crowd's majority, as in the paper, then by each rater group's.</p>",
        "<h3>Full set</h3>",
        _win_table(full),
        "<h3>Filtered set</h3>",
        _win_table(filtered),
        "<h3>By rater group, full set</h3>",
        _win_table(full, by_group=True, table_id="win-rates-by-group-full"),
        "<h3>By rater group, filtered set</h3>",
        _win_table(filtered, by_group=True, table_id="win-rates-by-group-filtered"),
        "<h2>Plots</h2>",
        *images,
        "<h2>Raters (full set, for QC)</h2>",
        _worker_table(full),
    ]
    return page(title, body, STYLE)
