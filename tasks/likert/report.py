"""Render a Likert analysis as PNG plots and one self-contained HTML page."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

# Figure is used directly (never pyplot) so rendering touches no global state and needs no
# display; savefig picks the Agg canvas for PNG on its own.
from matplotlib.figure import Figure

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
    "means_full": "means_full.png",
    "means_filtered": "means_filtered.png",
    "agreement": "agreement.png",
    "bias": "rater_bias.png",
}
SETS: tuple[tuple[str, str], ...] = (("full", "Full set"), ("filtered", "Filtered set"))
ALL_ITEMS = "all"
MAX_BIAS_ROWS = 200
COLORS = ("#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#57606a", "#bf3989")
STYLE = style(max_width="80rem", extra="small { color: #57606a; }\n")

Section = Mapping[str, Any]


def _pval(value: Any) -> str:
    if value is None:
        return "n/a"
    return "<0.0001" if float(value) < 1e-4 else f"{float(value):.4f}"


def _item_group(value: Any) -> str:
    return ALL_ITEMS if value is None else str(value)


def plot_means(part: Section, title: str) -> Figure:
    """Mean rating per attribute, one bar per rater group × item group, ± SEM."""
    fig = Figure(figsize=(8, 4.5), layout="tight")
    attributes = list(part.get("attributes") or [])
    cells = [d for d in part.get("descriptives") or [] if d.get("item_group") is not None]
    series = list(dict.fromkeys((d["rater_group"], d["item_group"]) for d in cells))
    if not attributes or not series:
        no_data(fig, title)
        return fig
    lookup = {(d["rater_group"], d["item_group"], d["attribute"]): d for d in cells}
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for index, (group, item_group) in enumerate(series):
        xs, means, errors = [], [], []
        for position, attribute in enumerate(attributes):
            d = lookup.get((group, item_group, attribute))
            if d is None or d.get("mean") is None:
                continue
            xs.append(position - 0.4 + width * (index + 0.5))
            means.append(d["mean"])
            std, n = d.get("std"), d.get("n") or 0
            errors.append(std / np.sqrt(n) if std is not None and n else 0.0)
        ax.bar(
            xs,
            means,
            width=width,
            yerr=errors,
            capsize=3,
            color=COLORS[index % len(COLORS)],
            label=f"{group} · {item_group}",
        )
    ax.set_xticks(range(len(attributes)), labels=attributes)
    scales = part.get("scales") or {}
    highs = [scale[1] for scale in scales.values() if scale]
    ax.set_ylim(0, max(highs) if highs else None)
    ax.set_ylabel("mean rating (± SEM)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return fig


def plot_agreement(data: Section) -> Figure:
    """Krippendorff's alpha (interval) per attribute and rater group, full vs filtered."""
    title = "Krippendorff's alpha (interval), all item groups"
    fig = Figure(figsize=(8, 4.5), layout="tight")
    bars = []
    for key, label in SETS:
        part = data.get(key) or {}
        order = {name: index for index, name in enumerate(part.get("attributes") or [])}
        entries = [
            a
            for a in part.get("agreement") or []
            if a.get("item_group") is None and a.get("alpha_interval") is not None
        ]
        # Questionnaire order within each rater group, as in the tables.
        entries.sort(key=lambda a: (a["rater_group"], order.get(a["attribute"], len(order))))
        for a in entries:
            bars.append((f"{a['rater_group']}: {a['attribute']}", label, a["alpha_interval"]))
    if not bars:
        no_data(fig, title)
        return fig
    ax = fig.add_subplot()
    names = list(dict.fromkeys(name for name, _, _ in bars))
    for index, (_, label) in enumerate(SETS):
        values = {name: value for name, set_label, value in bars if set_label == label}
        xs = [n + (index - 0.5) * 0.4 for n, name in enumerate(names) if name in values]
        ax.bar(
            xs,
            [values[n] for n in names if n in values],
            width=0.4,
            label=label,
            color=COLORS[index],
        )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)), labels=names, fontsize="small", rotation=30, ha="right")
    ax.set_ylabel("alpha (1 = perfect, 0 = chance)")
    ax.set_title(title)
    ax.legend()
    return fig


def plot_bias(data: Section) -> Figure:
    """Distribution of per-rater bias (rating minus the other raters' mean), per attribute."""
    title = "Rater bias: own rating minus the other raters' mean"
    fig = Figure(figsize=(8, 4.5), layout="tight")
    panels = []
    for key, label in SETS:
        # Keyed in questionnaire order, so colours match across the two panels.
        by_attribute: dict[str, list[float]] = {
            name: [] for name in (data.get(key) or {}).get("attributes") or []
        }
        for b in (data.get(key) or {}).get("rater_bias") or []:
            if b.get("bias") is not None:
                by_attribute.setdefault(b["attribute"], []).append(float(b["bias"]))
        panels.append((label, by_attribute))
    if not any(values for _, by in panels for values in by.values()):
        no_data(fig, title)
        return fig
    axes = fig.subplots(1, 2, sharey=True)
    everything = [v for _, by in panels for values in by.values() for v in values]
    edges = np.linspace(min(everything + [-1.0]), max(everything + [1.0]), 21)
    for ax, (label, by_attribute) in zip(axes, panels, strict=True):
        for index, (attribute, values) in enumerate(by_attribute.items()):
            if not values:
                continue
            ax.hist(
                values,
                bins=edges,
                histtype="step",
                linewidth=1.5,
                label=attribute,
                color=COLORS[index % len(COLORS)],
            )
        ax.axvline(0, color="black", linewidth=0.8, linestyle=":")
        ax.set_title(label)
        ax.set_xlabel("bias (scale points)")
        if any(by_attribute.values()):
            ax.legend(fontsize="small")
    axes[0].set_ylabel("raters")
    fig.suptitle(title)
    return fig


def paper_table_html(part: Section) -> str:
    """Rows rater group × item group, columns attribute; cells mean (std), α, % exact."""
    attributes = list(part.get("attributes") or [])
    rows = []
    for row in part.get("table") or []:
        cells = [esc(row["rater_group"]), esc(_item_group(row["item_group"]))]
        for attribute in attributes:
            c = row["cells"].get(attribute) or {}
            cells.append(
                f"{esc(dec(c.get('mean')))} ({esc(dec(c.get('std')))})<br>"
                f"<small>α int {esc(dec(c.get('alpha_interval')))} · "
                f"ord {esc(dec(c.get('alpha_ordinal')))} · "
                f"exact {esc(pct(c.get('exact')))} · n {esc(integer(c.get('n')))}</small>"
            )
        rows.append(cells)
    return table(["Rater group", "Item group", *attributes], rows, raw=True)


def _tau_between_html(part: Section) -> str:
    rows = [
        [
            t["group_a"],
            t["group_b"],
            t["attribute"],
            dec(t["tau"], 3),
            _pval(t["p"]),
            integer(t["n_items"]),
            t.get("note") or "",
        ]
        for t in part.get("tau_between_groups") or []
    ]
    return table(["Rater group A", "Rater group B", "Attribute", "τ", "p", "items", "note"], rows)


def _tau_within_html(part: Section) -> str:
    rows = [
        [
            t["rater_group"],
            t["attribute"],
            dec(t["mean_tau"], 3),
            integer(t["n_pairs"]),
            integer(t["n_undefined"]),
            integer(t["n_raters"]),
        ]
        for t in part.get("tau_within_groups") or []
    ]
    header = ["Rater group", "Attribute", "mean pairwise τ", "pairs", "undefined pairs", "raters"]
    return table(header, rows)


def _welch_html(part: Section) -> str:
    rows = [
        [
            w["rater_group"],
            w["attribute"],
            w["group_a"],
            w["group_b"],
            dec(w["mean_a"]),
            dec(w["mean_b"]),
            dec(w["t"], 3),
            _pval(w["p"]),
            integer(w["n1"]),
            integer(w["n2"]),
            w.get("note") or "",
        ]
        for w in part.get("welch") or []
    ]
    header = [
        "Rater group",
        "Attribute",
        "Item group A",
        "Item group B",
        "mean A",
        "mean B",
        "t",
        "p",
        "n A",
        "n B",
        "note",
    ]
    caveat = (
        "<p class='muted'>Welch's t-test on individual ratings, as in the paper. Ratings of "
        "one item or by one rater are not independent, so these p-values are optimistic; "
        "compare per-item means (the tau tables) before trusting a small p.</p>"
    )
    return table(header, rows) + caveat


def _bias_html(part: Section) -> str:
    biases = [b for b in part.get("rater_bias") or [] if b.get("bias") is not None]
    biases.sort(key=lambda b: -abs(float(b["bias"])))
    rows = [
        [
            b["rater_group"],
            b["worker"],
            b["attribute"],
            dec(b["bias"]),
            dec(b["mean"]),
            integer(b["n"]),
        ]
        for b in biases[:MAX_BIAS_ROWS]
    ]
    note = (
        f"<p>The {MAX_BIAS_ROWS} largest of {len(biases)} shown.</p>"
        if len(biases) > MAX_BIAS_ROWS
        else ""
    )
    header = ["Rater group", "Rater", "Attribute", "bias", "rater's mean", "n compared"]
    return note + table(header, rows)


def _counts_html(part: Section) -> str:
    counts = part.get("counts") or {}
    line = (
        f"<p>{integer(counts.get('n_ratings', 0))} ratings ({integer(counts.get('n_missing', 0))} "
        f"missing) in {integer(counts.get('n_responses', 0))} responses by "
        f"{integer(counts.get('n_raters', 0))} raters on "
        f"{integer(counts.get('n_items', 0))} items, of the rater groups "
        f"{esc(names(part.get('rater_groups')))}; "
        "every table below gives each rater group on its own rows.</p>"
    )
    rows = [
        [group, integer(c.get("n_raters")), integer(c.get("n_items")), integer(c.get("n_ratings"))]
        for group, c in (counts.get("by_rater_group") or {}).items()
    ]
    return line + table(["Rater group", "raters", "items", "ratings"], rows)


def _filters_html(data: Section) -> str:
    attention = data.get("attention") or {}
    excluded = data.get("excluded") or {}
    failed = names(attention.get("failed_workers"))
    parts = [
        f"<p>{esc(integer(attention.get('n_checks', 0)))} attention checks answered, "
        f"{esc(integer(attention.get('n_failed_checks', 0)))} failed; "
        f"{esc(integer(attention.get('workers_failed', 0)))} of "
        f"{esc(integer(attention.get('workers_checked', 0)))} checked workers failed at least one "
        f"({esc(pct(attention.get('worker_failure_rate')))}). Failed: {esc(failed)}.</p>",
        f"<p>The filtered set leaves out {esc(integer(excluded.get('n_workers', 0)))} workers "
        f"and {esc(integer(excluded.get('n_responses', 0)))} responses (QC judges live workers "
        "and the raters of imported answers alike).</p>",
    ]
    parts.append(exclusions_by_group(data))
    rules = data.get("rules") or {}
    if rules:
        parts.append(table(RULE_HEADER, rule_rows(rules)))
    return "".join(parts)


def render_report(data: dict[str, Any], out_dir: pathlib.Path, title: str) -> str:
    """Write the PNG plots into out_dir and return the HTML report with them embedded."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {
        "means_full": plot_means(data.get("full") or {}, "Mean rating, full set"),
        "means_filtered": plot_means(data.get("filtered") or {}, "Mean rating, filtered set"),
        "agreement": plot_agreement(data),
        "bias": plot_bias(data),
    }
    images = embed_figures(figures, out_dir, PLOT_FILES)
    study = data.get("study") or {}
    config = study.get("config") or {}
    parts: list[str] = []
    if config:
        parts.append(
            f"<p>Template: {esc(config.get('template') or 'custom')} · groups served "
            f"{esc(config.get('group_order', 'mixed'))} · "
            f"{esc(config.get('annotations_per_item', 'n/a'))} raters per item.</p>"
        )
    parts += ["<h2>Attention checks and filters</h2>", _filters_html(data)]
    parts += ["<h2>Plots</h2>", *images]
    for key, label in SETS:
        part: Section = data.get(key) or {}
        parts += [
            f"<h2>{esc(label)}</h2>",
            _counts_html(part),
            "<h3>Ratings by rater group and item group</h3>",
            "<p>Mean (standard deviation); Krippendorff's α interval and ordinal; share of "
            "items (with 2+ ratings) on which all raters agreed exactly.</p>",
            paper_table_html(part),
            "<h3>Kendall's τ between rater groups (per-item mean ratings)</h3>",
            _tau_between_html(part),
            "<h3>Mean pairwise Kendall's τ between raters of a group</h3>",
            _tau_within_html(part),
            "<h3>Welch's t-test between item groups</h3>",
            _welch_html(part),
            "<h3>Rater bias</h3>",
            "<p>Mean of (the rater's rating − the mean of the other raters of the same group "
            "on the same item); largest first.</p>",
            _bias_html(part),
        ]
    return page(title, parts, STYLE)
