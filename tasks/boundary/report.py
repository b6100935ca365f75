"""Render a boundary-detection analysis as PNG plots and one self-contained HTML page."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from typing import Any

# Figure is used directly (never pyplot) so rendering touches no global state and needs no display;
# savefig then picks the Agg canvas for PNG on its own.
from matplotlib.figure import Figure

from tasks.boundary.reasons import REASON_LABELS
from tasks.report_html import (
    RULE_HEADER,
    dec,
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
    "distance": "distance_histogram.png",
    "position": "points_by_position.png",
    "decoding": "points_by_decoding.png",
}
SETS: tuple[tuple[str, str, str], ...] = (
    ("full", "Full set", "#9aa5b1"),
    ("filtered", "Filtered set", "#1f6feb"),
)
STYLE = style(max_width="70rem")

Section = Mapping[str, Any]


def _get(section: Section, *path: str) -> Any:
    current: Any = section
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _plot_distance(full: Section, filtered: Section) -> Figure:
    fig = Figure(figsize=(7, 4), layout="tight")
    title = "Guess minus true boundary"
    histograms = {
        key: _get(part, "distance_histogram") or {}
        for key, part in (("full", full), ("filtered", filtered))
    }
    keys = [int(k) for hist in histograms.values() for k in hist]
    if not keys:
        no_data(fig, title)
        return fig
    xs = list(range(min(keys), max(keys) + 1))
    ax = fig.add_subplot()
    width = 0.4
    for offset, (key, label, color) in zip((-width / 2, width / 2), SETS, strict=True):
        hist = histograms[key]
        total = sum(hist.values())
        # Shares rather than counts: the filtered set is smaller, and the shapes are what matter.
        shares = [100 * hist.get(str(x), 0) / total if total else 0.0 for x in xs]
        ax.bar(
            [x + offset for x in xs], shares, width=width, color=color, label=f"{label} (n={total})"
        )
    ax.axvline(0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(xs)
    ax.set_xlabel("distance (sentences; negative = too early, 0 = exact)")
    ax.set_ylabel("% of annotations")
    ax.set_title(title)
    ax.legend()
    return fig


def _plot_means(
    full: Section, filtered: Section, key: str, x_key: str, title: str, x_label: str, offset: float
) -> Figure:
    fig = Figure(figsize=(7, 4), layout="tight")
    series = {
        name: [p for p in (_get(part, key) or []) if p.get("mean") is not None]
        for name, part in (("full", full), ("filtered", filtered))
    }
    if not any(series.values()):
        no_data(fig, title)
        return fig
    ax = fig.add_subplot()
    # Offsetting the two sets sideways keeps overlapping error bars readable.
    for shift, (name, label, color) in zip((-offset, offset), SETS, strict=True):
        points = series[name]
        if not points:
            continue
        ax.errorbar(
            [float(p[x_key]) + shift for p in points],
            [p["mean"] for p in points],
            yerr=[p["sem"] or 0.0 for p in points],
            fmt="o-",
            capsize=3,
            color=color,
            label=label,
        )
    # Ticks only where there is data: integer positions, or the decoding values themselves.
    ticks = sorted({float(p[x_key]) for points in series.values() for p in points})
    ax.set_xticks(ticks, labels=[f"{tick:g}" for tick in ticks])
    ax.set_ylim(bottom=0)
    ax.set_xlabel(x_label)
    ax.set_ylabel("mean points (± SEM)")
    ax.set_title(title)
    ax.legend()
    return fig


HEADLINE: tuple[tuple[str, tuple[str, ...], Callable[[Any], str]], ...] = (
    ("Annotations", ("n_annotations",), integer),
    ("Workers", ("n_workers",), integer),
    ("Items", ("n_items",), integer),
    ("Exact accuracy", ("exact_accuracy",), pct),
    ("Mean distance (guess - boundary)", ("mean_distance",), dec),
    ("Mean points", ("mean_points",), dec),
    ("Mean points, top 5% of workers", ("skill_range", "top_5pct_mean"), dec),
    ("Mean points, bottom 5% of workers", ("skill_range", "bottom_5pct_mean"), dec),
    ("Workers in each 5% group", ("skill_range", "n_workers_each"), integer),
    ("Items with 2+ annotations", ("agreement", "n_items"), integer),
    ("Annotation pairs", ("agreement", "n_pairs"), integer),
    ("Pairs on the same sentence", ("agreement", "same_sentence"), pct),
    ("Pairs within one sentence", ("agreement", "within_one"), pct),
    ("Explanations", ("explanations", "n_explanations"), integer),
    ("Unique explanations", ("explanations", "n_unique"), integer),
    ("Copied explanations", ("explanations", "n_copies"), integer),
)


def _group_table(full: Section, filtered: Section, key: str, label: str) -> str:
    full_groups = _get(full, key) or {}
    filtered_groups = _get(filtered, key) or {}
    rows = []
    for name in sorted(set(full_groups) | set(filtered_groups)):
        a, b = full_groups.get(name, {}), filtered_groups.get(name, {})
        rows.append(
            [
                name,
                integer(a.get("n_annotations", 0)),
                integer(b.get("n_annotations", 0)),
                pct(a.get("exact_accuracy")),
                pct(b.get("exact_accuracy")),
                dec(a.get("mean_distance")),
                dec(b.get("mean_distance")),
                dec(a.get("mean_points")),
                dec(b.get("mean_points")),
                pct(_get(a, "agreement", "same_sentence")),
                pct(_get(b, "agreement", "same_sentence")),
            ]
        )
    header = [
        label,
        "n (full)",
        "n (filtered)",
        "exact (full)",
        "exact (filtered)",
        "mean distance (full)",
        "mean distance (filtered)",
        "mean points (full)",
        "mean points (filtered)",
        "same sentence (full)",
        "same sentence (filtered)",
    ]
    return table(header, rows)


def render_report(data: dict[str, Any], out_dir: pathlib.Path, title: str) -> str:
    """Write the three PNG plots into out_dir and return the HTML report with them embedded."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    full: Section = data.get("full") or {}
    filtered: Section = data.get("filtered") or {}
    attention: Section = data.get("attention") or {}
    excluded: Section = data.get("excluded") or {}
    rules: Section = data.get("rules") or {}

    figures = {
        "distance": _plot_distance(full, filtered),
        "position": _plot_means(
            full,
            filtered,
            "points_by_position",
            "position",
            "Mean points by position in the session",
            "position in session (0 = first HIT)",
            0.08,
        ),
        "decoding": _plot_means(
            full,
            filtered,
            "points_by_decoding",
            "value",
            "Mean points by decoding p (top-p)",
            "decoding p",
            0.005,
        ),
    }
    images = embed_figures(figures, out_dir, PLOT_FILES)

    caught = names(attention.get("failed_workers"))
    attention_html = (
        f"<p>{esc(integer(attention.get('n_checks', 0)))} attention checks answered, "
        f"{esc(integer(attention.get('n_failed_checks', 0)))} failed. "
        f"{esc(integer(attention.get('workers_failed', 0)))} of "
        f"{esc(integer(attention.get('workers_checked', 0)))} checked workers failed at least one "
        f"(failure rate {esc(pct(attention.get('worker_failure_rate')))}).</p>"
        f"<p>Workers caught: {esc(caught)}</p>"
        f"<p>The filtered set leaves out {esc(integer(excluded.get('n_workers', 0)))} workers "
        f"and {esc(integer(excluded.get('n_responses', 0)))} responses.</p>"
        + exclusions_by_group(data)
        + (table(RULE_HEADER, rule_rows(rules)) if rules else "")
    )
    headline = table(
        ["Metric", "Full set", "Filtered set"],
        [
            [label, fmt(_get(full, *path)), fmt(_get(filtered, *path))]
            for label, path, fmt in HEADLINE
        ],
    )

    def sentence(part: Section, name: str) -> str:
        agreement = _get(part, "agreement") or {}
        explanations = _get(part, "explanations") or {}
        return (
            f"<li>{esc(name)}: {esc(integer(agreement.get('n_pairs', 0)))} pairs over "
            f"{esc(integer(agreement.get('n_items', 0)))} items; "
            f"{esc(pct(agreement.get('same_sentence')))} chose the same sentence, "
            f"{esc(pct(agreement.get('within_one')))} were within one sentence. "
            f"{esc(integer(explanations.get('n_explanations', 0)))} explanations, "
            f"{esc(integer(explanations.get('n_unique', 0)))} unique, "
            f"{esc(integer(explanations.get('n_copies', 0)))} copies.</li>"
        )

    full_reasons = _get(full, "reasons") or {}
    filtered_reasons = _get(filtered, "reasons") or {}
    reason_rows = [
        [
            REASON_LABELS.get(tag, tag),
            integer(full_reasons.get(tag, 0)),
            integer(filtered_reasons.get(tag, 0)),
        ]
        for tag in dict.fromkeys([*full_reasons, *filtered_reasons])
    ]
    pooled = [names(_get(part, "rater_groups")) for part in (full, filtered)]
    body = [
        "<h2>Attention checks</h2>",
        attention_html,
        "<h2>Full vs filtered set</h2>",
        f"<p>Every figure pools the rater groups: {esc(pooled[0])} (full set); "
        f"{esc(pooled[1])} (filtered set). The table by rater group below gives "
        "each group alone.</p>",
        headline,
        "<h2>Plots</h2>",
        *images,
        "<h2>Agreement and explanations</h2>",
        "<ul>" + sentence(full, "Full set") + sentence(filtered, "Filtered set") + "</ul>",
        "<h2>Reasons given</h2>",
        table(["Reason", "Full set", "Filtered set"], reason_rows),
        "<h2>By category</h2>",
        _group_table(full, filtered, "by_category", "Category"),
        "<h2>By generator</h2>",
        _group_table(full, filtered, "by_generator", "Generator"),
        "<h2>By rater group</h2>",
        _group_table(full, filtered, "by_rater_group", "Rater group"),
    ]
    return page(title, body, STYLE)
