"""The form study's HTML report: counts and filters, then one section per field.

Each field's section has a plot of its answers on the full and the filtered set side by
side (a rating's histogram, a category's selection rates, a rank's mean rank per candidate),
its agreement, and its rater groups compared.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

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

SETS: tuple[tuple[str, str], ...] = (("full", "Full set"), ("filtered", "Filtered set"))
COLORS = ("#1f6feb", "#d1242f")
STYLE = style(
    max_width="80rem",
    extra=(
        "small, .muted { color: #57606a; }\n"
        # Cells keep a line each (a table wider than a phone scrolls by itself).
        "td { white-space: nowrap; }\n"
        "section.field { border-top: 2px solid #d0d7de; margin-top: 2rem; }\n"
        ".kind { font-size: 0.8em; color: #57606a; font-weight: normal; }\n"
    ),
)

Section = Mapping[str, Any]


def _fields(data: Section) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, type, {set key: the field's summary}) in the full set's order."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, _ in SETS:
        for entry in (data.get(key) or {}).get("fields") or []:
            out.setdefault((entry["id"], entry["type"]), {})[key] = entry
    return [(name, kind, parts) for (name, kind), parts in out.items()]


def _bars(field: Mapping[str, Any]) -> tuple[list[str], list[float | None], str]:
    """The plotted labels and heights of one field in one set, and the y axis's label."""
    dist = field.get("distribution") or {}
    if field["type"] == "rating":
        hist = dist.get("histogram") or []
        return [str(h["value"]) for h in hist], [h["count"] for h in hist], "answers"
    if field["type"] == "category":
        choices = dist.get("choices") or []
        return [c["value"] for c in choices], [c["rate"] for c in choices], "share chose it"
    if field["type"] == "rank":
        choices = dist.get("choices") or []
        return [c["value"] for c in choices], [c["mean_rank"] for c in choices], "mean rank"
    return [], [], ""


def plot_field(parts: Mapping[str, Any], title: str) -> Figure:
    """The field's answers on the full and the filtered set, as grouped bars."""
    fig = Figure(figsize=(8, 3.6), layout="tight")
    series = [(label, *_bars(parts[key])) for key, label in SETS if key in parts]
    if not series or not any(v is not None for _, _, values, _ in series for v in values):
        no_data(fig, title)
        return fig
    ax = fig.add_subplot()
    labels = list(dict.fromkeys(name for _, names_, _, _ in series for name in names_))
    for index, (set_label, names_, values, _) in enumerate(series):
        height = dict(zip(names_, values, strict=True))
        xs = [n + (index - 0.5) * 0.4 for n, name in enumerate(labels)]
        ax.bar(
            xs,
            [height.get(name) or 0 for name in labels],
            width=0.4,
            label=set_label,
            color=COLORS[index],
        )
    short = [name if len(name) <= 18 else name[:17] + "…" for name in labels]
    ax.set_xticks(range(len(labels)), labels=short, fontsize="small", rotation=20, ha="right")
    ax.set_ylabel(series[0][3])
    if parts[next(iter(parts))]["type"] == "rating":
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of answers
    ax.set_title(title)
    # Beside the plot, where it never hides a bar.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def _distribution_html(parts: Mapping[str, Any]) -> str:
    any_part = next(iter(parts.values()))
    kind = any_part["type"]
    rows = []
    for key, label in SETS:
        field = parts.get(key)
        if field is None:
            continue
        dist = field.get("distribution") or {}
        answered = f"{integer(field.get('n_answers'))} ({integer(field.get('n_missing'))} blank)"
        if kind == "rating":
            rows.append([label, answered, dec(dist.get("mean")), dec(dist.get("std"))])
        elif kind == "text":
            rows.append(
                [
                    label,
                    answered,
                    dec(dist.get("mean"), 1),
                    dec(dist.get("median"), 0),
                    f"{integer(dist.get('min'))}-{integer(dist.get('max'))}",
                    dec(dist.get("mean_words"), 1),
                ]
            )
        else:
            cells = [
                pct(c["rate"]) if kind == "category" else dec(c["mean_rank"])
                for c in dist.get("choices") or []
            ]
            rows.append([label, answered, *cells])
    if kind == "rating":
        header = ["Set", "answers", "mean", "sd"]
    elif kind == "text":
        header = ["Set", "answers", "mean characters", "median", "range", "mean words"]
    else:
        choices = [c["value"] for c in (any_part.get("distribution") or {}).get("choices") or []]
        header = ["Set", "answers", *choices]
    caption = {
        "category": "<p>Share of answers choosing each value.</p>",
        "rank": "<p>Mean rank of each candidate (1 = best).</p>",
    }.get(kind, "")
    return caption + table(header, rows, table_id="")


def _agreement_html(parts: Mapping[str, Any]) -> str:
    any_part = next(iter(parts.values()))
    if any_part["type"] == "text":
        return "<p class='muted'>Free text: no agreement measure.</p>"
    rows = []
    for key, label in SETS:
        field = parts.get(key)
        if field is None:
            continue
        a = field.get("agreement") or {}
        alpha = dec(a.get("alpha"), 3)
        if a.get("alpha_interval") is not None:
            alpha += f" (interval {dec(a.get('alpha_interval'), 3)})"
        rows.append(
            [
                label,
                alpha,
                a.get("alpha_note") or "",
                pct(a.get("exact")),
                integer(a.get("n_pairs")),
                integer(a.get("n_items_multi")),
            ]
        )
    level = (any_part.get("agreement") or {}).get("level")
    unit = {
        "category": "each choice chosen or not (binary), pooled over choices"
        if (any_part.get("distribution") or {}).get("multi")
        else "the value chosen",
        "rank": "each candidate's position, pooled over candidates",
        "rating": "the rating",
    }[any_part["type"]]
    parts_html = [
        f"<p>Krippendorff's α ({esc(level)}) on {esc(unit)}; exact agreement is the share of "
        "pairs of answers to the same item that are equal.</p>",
        table(["Set", "α", "note", "exact", "pairs", "items with 2+ answers"], rows),
    ]
    per_choice = [
        (label, parts[key]["agreement"].get("per_choice") or [])
        for key, label in SETS
        if key in parts
    ]
    if any(entries for _, entries in per_choice):
        choices = [e["choice"] for e in per_choice[0][1]]
        rows = [[label, *(dec(e["alpha"], 3) for e in entries)] for label, entries in per_choice]
        parts_html += ["<p>α per choice:</p>", table(["Set", *choices], rows)]
    return "".join(parts_html)


def _group_summary(kind: str, dist: Mapping[str, Any]) -> str:
    """One rater group's answers in one cell (HTML: a line per choice)."""
    if kind == "rating":
        return esc(f"{dec(dist.get('mean'))} ({dec(dist.get('std'))})")
    if kind == "text":
        return esc(f"{dec(dist.get('mean'), 1)} characters")
    choices = dist.get("choices") or []
    if kind == "category":
        return "<br>".join(esc(f"{c['value']}: {pct(c['rate'])}") for c in choices)
    return "<br>".join(esc(f"{c['value']}: {dec(c['mean_rank'])}") for c in choices)


def _groups_html(parts: Mapping[str, Any]) -> str:
    kind = next(iter(parts.values()))["type"]
    rows, between = [], []
    for key, label in SETS:
        field = parts.get(key)
        if field is None:
            continue
        for g in field.get("by_rater_group") or []:
            a = g.get("agreement") or {}
            cells = [
                esc(label),
                esc(g["rater_group"]),
                esc(integer(g["n_workers"])),
                esc(integer(g["n_answers"])),
                _group_summary(kind, g.get("distribution") or {}),
            ]
            if kind != "text":
                cells += [esc(dec(a.get("alpha"), 3)), esc(pct(a.get("exact")))]
            rows.append(cells)
        if kind == "text":  # free text is not compared between groups
            continue
        for b in field.get("between_groups") or []:
            between.append(
                [
                    label,
                    f"{b['group_a']} vs {b['group_b']}",
                    integer(b["n_items"]),
                    pct(b.get("exact")),
                    pct(b.get("modal_agreement")),
                    dec(b.get("tau"), 3) if "tau" in b else "",
                    b.get("note") or "",
                ]
            )
    summary = {
        "rating": "mean (sd)",
        "text": "length",
        "category": "share choosing",
        "rank": "mean rank",
    }[kind]
    header = ["Set", "Rater group", "raters", "answers", summary]
    out = [table(header if kind == "text" else [*header, "α", "exact"], rows, raw=True)]
    if between:
        out.append(
            "<p>Between groups, on the items both answered: the share of cross-group pairs of "
            "answers that are equal, the share of items whose most common answers agree, and "
            "Kendall's τ between the groups' mean rating of each item (ratings) or mean "
            "position of each candidate (ranks).</p>"
        )
        header = ["Set", "Groups", "items", "exact", "same most common", "τ", "note"]
        out.append(table(header, between))
    return "".join(out)


def _counts_html(data: Section) -> str:
    rows = []
    for key, label in SETS:
        part = data.get(key) or {}
        counts = part.get("counts") or {}
        gold = part.get("gold") or {}
        rows.append(
            [
                label,
                integer(counts.get("n_responses", 0)),
                integer(counts.get("n_workers", 0)),
                integer(counts.get("n_items", 0)),
                names(part.get("rater_groups")),
                f"{pct(gold.get('mean_score'))} on {integer(gold['n'])} answers"
                if gold.get("n")
                else "no gold answered",
            ]
        )
    header = ["Set", "responses", "workers", "items", "rater groups", "gold score"]
    return table(header, rows, table_id="counts")


def _filters_html(data: Section) -> str:
    attention = data.get("attention") or {}
    excluded = data.get("excluded") or {}
    parts = [
        f"<p>{esc(integer(attention.get('n_checks', 0)))} attention checks answered, "
        f"{esc(pct(attention.get('pass_rate')))} passed; "
        f"{esc(integer(attention.get('workers_failed', 0)))} of "
        f"{esc(integer(attention.get('workers_checked', 0)))} checked workers failed at least "
        f"one. Failed: {esc(names(attention.get('failed_workers')))}.</p>",
        f"<p>The filtered set leaves out {esc(integer(excluded.get('n_workers', 0)))} workers "
        f"and {esc(integer(excluded.get('n_responses', 0)))} responses (QC judges live workers "
        "and the raters of imported answers alike).</p>",
        exclusions_by_group(data),
    ]
    rules = data.get("rules") or {}
    if rules:
        parts.append(table(RULE_HEADER, rule_rows(rules)))
    return "".join(parts)


def render_report(data: dict[str, Any], out_dir: pathlib.Path, title: str) -> str:
    """Write each field's PNG plot into out_dir and return the HTML report embedding them."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fields = _fields(data)
    body = [
        "<h2>Responses</h2>",
        _counts_html(data),
        "<h2>Attention checks and filters</h2>",
        _filters_html(data),
        "<h2>Fields</h2>",
        "<ul>"
        + "".join(
            f'<li><a href="#field-{index}">{esc(name)}</a> <small>{esc(kind)}</small></li>'
            for index, (name, kind, _) in enumerate(fields)
        )
        + "</ul>"
        if fields
        else "<p>No field answered yet.</p>",
    ]
    for index, (name, kind, parts) in enumerate(fields):
        field = next(iter(parts.values()))
        images = []
        if kind != "text":
            file = f"field-{index}.png"
            figure = plot_field(parts, f"{name}: full vs filtered set")
            images = embed_figures({file: figure}, out_dir, {file: file})
        body += [
            f'<section class="field" id="field-{index}">',
            f'<h2>{esc(name)} <span class="kind">{esc(kind)}</span></h2>',
            f"<p>{esc(field.get('title') or '')}</p>",
            _distribution_html(parts),
            *images,
            "<h3>Agreement</h3>",
            _agreement_html(parts),
            "<h3>Rater groups</h3>",
            _groups_html(parts),
            "</section>",
        ]
    return page(title, body, STYLE)
