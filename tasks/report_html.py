"""Shared pieces of the task reports: value formatting, HTML tables, PNG plots and the page.

Pure helpers: nothing here touches Flask or the database. Figures are matplotlib `Figure`
objects (never pyplot), so rendering touches no global state and needs no display; savefig
picks the Agg canvas for PNG on its own.
"""

from __future__ import annotations

import base64
import html
import io
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

NO_DATA = "no data"


def esc(value: Any) -> str:
    """HTML-escape str(value), quotes included."""
    return html.escape(str(value), quote=True)


def pct(value: Any) -> str:
    """A share (0-1) as a percentage with one decimal; None as "n/a"."""
    return "n/a" if value is None else f"{100 * float(value):.1f}%"


def dec(value: Any, digits: int = 2) -> str:
    """A number with `digits` decimals; None as "n/a"."""
    return "n/a" if value is None else f"{float(value):.{digits}f}"


def integer(value: Any) -> str:
    """A count as an integer; None as "n/a"."""
    return "n/a" if value is None else str(int(value))


def names(values: Iterable[Any] | None) -> str:
    """Names (rater groups, workers) joined with commas, or "none"; not escaped."""
    return ", ".join(str(value) for value in values or []) or "none"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    raw: bool = False,
    table_id: str = "",
) -> str:
    """An HTML table; cells are escaped unless `raw` (cells built from escaped parts).

    An empty table gets one "no data" row; `table_id` sets the table's id attribute.
    """
    head = "".join(f"<th>{esc(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell if raw else esc(cell)}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(header)}">{NO_DATA}</td></tr>'
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def no_data(fig: Figure, title: str) -> None:
    """Draw an empty, titled panel saying "no data"."""
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes, fontsize=14)
    ax.set_xticks([])
    ax.set_yticks([])


def save_png(fig: Figure, path: pathlib.Path) -> bytes:
    """Write the figure to `path` as PNG and return the bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    png = buffer.getvalue()
    path.write_bytes(png)
    return png


def embed_figures(
    figures: Mapping[str, Figure], out_dir: pathlib.Path, files: Mapping[str, str]
) -> list[str]:
    """Save each figure as out_dir / files[key] and return <figure> blocks embedding them."""
    images = []
    for key, fig in figures.items():
        png = save_png(fig, out_dir / files[key])
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        images.append(
            f'<figure><img src="{uri}" alt="{esc(files[key])}">'
            f"<figcaption>{esc(files[key])}</figcaption></figure>"
        )
    return images


def style(max_width: str = "70rem", extra: str = "") -> str:
    """The report CSS; `extra` rules go before the figure rules."""
    return (
        "\nbody { font-family: system-ui, sans-serif; margin: 2rem; "
        f"max-width: {max_width}; color: #1b1f24; }}\n"
        # A table wider than a phone scrolls by itself; the page keeps its width.
        "table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; display: block; "
        "max-width: 100%; overflow-x: auto; }\n"
        "th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.6rem; text-align: right; }\n"
        "th:first-child, td:first-child { text-align: left; }\n"
        "thead th { background: #f6f8fa; }\n"
        f"{extra}"
        "figure { margin: 1rem 0; }\n"
        "img { max-width: 100%; }\n"
        "@media (max-width: 40rem) { body { margin: 1rem; } }\n"
    )


def page(title: str, body: Sequence[str], css: str) -> str:
    """One self-contained HTML page: the title as <title> and <h1>, then the body parts."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{css}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        *body,
        "</body></html>",
    ]
    return "\n".join(parts)


def exclusions_by_group(data: Mapping[str, Any]) -> str:
    """What the filtered set leaves out of each rater group (live workers and the raters of
    imported answers alike), as a table; "" where the analysis has no rater groups."""
    groups = (data.get("excluded") or {}).get("by_rater_group") or {}
    if not groups:
        return ""
    rows = [
        [name, integer(entry.get("n_workers", 0)), integer(entry.get("n_responses", 0))]
        for name, entry in groups.items()
    ]
    return table(
        ["Rater group", "raters left out", "responses left out"], rows, table_id="excluded-groups"
    )


def rule_rows(rules: Mapping[str, Any]) -> list[list[str]]:
    """One row per QC rule (or "reviewer") with what it removed, in all and per rater group."""
    return [
        [
            name,
            integer(entry.get("workers")),
            integer(entry.get("responses")),
            ", ".join(
                f"{group} {integer(part.get('workers'))}/{integer(part.get('responses'))}"
                for group, part in (entry.get("by_rater_group") or {}).items()
            ),
        ]
        for name, entry in sorted(rules.items())
    ]


RULE_HEADER = (
    "QC rule", "workers removed", "responses removed", "by rater group (workers/responses)",
)  # fmt: skip
