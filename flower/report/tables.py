"""Terminal tables that never cut or split a number (issue #18).

`number_tables(...)` lays out rows whose numeric columns must stay whole: numeric columns never wrap and
keep the width of their widest cell; text columns fold. When the numeric columns cannot all fit the
console's width beside the label columns, they are split over several tables, each repeating the label
columns, rather than letting rich cut a figure to "1…".

Invariant: every numeric cell is printed whole on one line, at any width from 40 columns up, as long as
one numeric column and the narrowest label fit.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

__all__ = ["number_tables"]

_OVERHEAD = 3
"""Cells per column besides its content: padding 1 + 1 and the separator."""
_LABEL_MIN = 10
"""Cells a label column may fold down to."""


def number_tables(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str | Text]],
    *,
    numeric: Sequence[bool],
    width: int,
    caption: str | None = None,
) -> list[Table]:
    """One table, or several side by side in reading order when the numbers need more than `width`."""
    cells = [[c if isinstance(c, Text) else Text(str(c)) for c in row] for row in rows]
    widths = [max([cell_len(headers[i]), *(c[i].cell_len for c in cells)]) for i in range(len(headers))]
    labels = [i for i, num in enumerate(numeric) if not num]
    numbers = [i for i, num in enumerate(numeric) if num]
    # n columns take their contents plus 3 * (n - 1) cells: no edge padding, 1 + 1 padding and a separator.
    label_width = sum(min(widths[i], max(_LABEL_MIN, cell_len(headers[i]))) + _OVERHEAD for i in labels)
    groups: list[list[int]] = [[]]
    used = label_width - _OVERHEAD
    for i in numbers:
        need = widths[i] + _OVERHEAD
        if groups[-1] and used + need > width:
            groups.append([])
            used = label_width - _OVERHEAD
        groups[-1].append(i)
        used += need
    tables = []
    for n, group in enumerate(groups):
        part = f" ({n + 1}/{len(groups)})" if len(groups) > 1 else ""
        table = Table(title=title + part, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                      caption=caption if n == len(groups) - 1 else None, caption_justify="left")
        columns = labels + group
        for i in columns:
            if numeric[i]:
                table.add_column(headers[i], justify="right", no_wrap=True, min_width=widths[i])
            else:
                table.add_column(headers[i], overflow="fold", min_width=min(widths[i], _LABEL_MIN))
        for row in cells:
            table.add_row(*(row[i] for i in columns))
        tables.append(table)
    return tables
