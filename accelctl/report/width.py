"""Text that fits the terminal: the output width, short run ids, priority-ordered columns.

``accelctl runs``, ``report``, ``compare`` (rich tables), ``plan`` (text) and ``validate``
(diagnostics) read well in an 80 x 24 terminal:

* ``output_width(stream, default)``: ``$COLUMNS`` when set, else the terminal's width
  when ``stream`` is a terminal, else ``default`` -- what each command did before it
  fitted (``runs``: 80, ``report``/``compare``: 200, as rich drew them, $COLUMNS
  included); ``plan`` and ``validate`` print plain text, which folds only on a terminal
  (there $COLUMNS overrides its size) and stays whole in a pipe or a file;
* ``short_ids(ids, universe)``: each run id's shortest unique tail of whole ``-`` segments
  (at least the 4 random hex digits), unique among ``universe`` (the store's ids), so that
  ``accelctl report SHORT`` / ``compare A B`` / ``run --resume`` find the same run;
* ``fit_table(title, columns, rows, width)``: a rich table that fits ``width``: optional
  columns (priority ``OPTIONAL`` or more) are left out, the lowest priority first, until
  the rest fits with every cell on one line, any column while the rest cannot fit even
  wrapped at its spaces; then headers wrap, then cells at their spaces (never inside a
  word), so no line is longer than ``width``.  The names of the columns left out come
  back, for a note that ``--wide`` shows them;
* ``wrap_note(text, width)``: a table's note wrapped by terminal cells.

``--wide`` (every column, full ids, lines as long as they need) is the callers' switch:
they pass ``width=None``.  Imports rich only inside the functions that draw.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: the console width ``--wide`` draws at: wide enough that no table is squeezed
UNBOUNDED = 10_000
#: columns of this priority or more are left out before any other column wraps a cell
OPTIONAL = 4
#: narrower than this, $COLUMNS is taken as a mistake and ignored
MIN_WIDTH = 40


def output_width(stream: Any, default: int | None, columns_in_pipe: bool = True) -> int | None:
    """The width to draw at: $COLUMNS, the terminal's, else ``default`` (see the module
    doc).  ``columns_in_pipe=False``: $COLUMNS counts only when ``stream`` is a terminal
    (plain text -- plans, diagnostics -- stays whole in a pipe whatever the environment)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) >= MIN_WIDTH and (tty or columns_in_pipe):
        return int(env)
    if tty:
        return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)
    return default


def short_ids(ids: Iterable[str], universe: Iterable[str] = ()) -> dict[str, str]:
    """{full id: shortest unique tail} (whole ``-`` segments, the random 4 hex digits at least)."""
    ids = list(dict.fromkeys(ids))
    every = set(universe) | set(ids)
    out = {}
    for full in ids:
        parts = full.split("-")
        short = full
        for k in range(1, len(parts) + 1):
            tail = "-".join(parts[-k:])
            if sum(other.endswith(tail) for other in every) == 1:
                short = tail
                break
        out[full] = short
    return out


def shorten(text: str, ids: dict[str, str]) -> str:
    """``text`` with each full id in ``ids`` replaced by its short form."""
    for full in sorted(ids, key=len, reverse=True):
        if full in text:
            text = text.replace(full, ids[full])
    return text


@dataclass(frozen=True)
class FitColumn:
    header: str
    #: 0 is kept longest; higher numbers are left out first when the width is short
    priority: int = 5
    justify: str = "left"
    #: never wrapped (short ids, numbers that must stay on one line)
    no_wrap: bool = False


def _narrowest(column: FitColumn, cells: Sequence[str]) -> int:
    """The narrowest a column reads well at: its longest word (header or cell; a cell
    wraps at its spaces, a no-wrap cell not at all)."""
    from rich.cells import cell_len

    words = column.header.split() or [""]
    for text in cells:
        words += text.splitlines() if column.no_wrap else text.split()
    return max(cell_len(w) for w in words)


def _widest(column: FitColumn, cells: Sequence[str]) -> int:
    """The width of a column whose header and cells are each on one line."""
    from rich.cells import cell_len

    return max(cell_len(line) for t in [column.header, *cells] for line in t.splitlines() or [""])


def _table_width(widths: Iterable[int]) -> int:
    """Content widths + a border and two spaces of padding per column + the last border."""
    widths = list(widths)
    return sum(widths) + 3 * len(widths) + 1


def _rich_table(title: str, columns: Sequence[FitColumn], rows: Sequence[Sequence[str]], keep: Sequence[int],
                title_justify: str, widths: dict[int, int]):
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_style="bold", title_justify=title_justify)
    for i in keep:
        c = columns[i]
        table.add_column(c.header, justify=c.justify, no_wrap=c.no_wrap, overflow="fold", width=widths.get(i))
    for row in rows:
        table.add_row(*(Text(row[i]) for i in keep))
    return table


def fit_table(title: str, columns: Sequence[FitColumn], rows: Sequence[Sequence[str]], width: int | None,
              title_justify: str = "left") -> tuple[Any, list[str]]:
    """(the rich table, headers of the columns left out) for ``width`` (None: all of them,
    each at its natural width).

    Columns of priority ``OPTIONAL`` or more are left out (the highest number first, the
    rightmost among equals) while the table does not fit with every cell on one line; any
    column, while the kept columns' narrowest widths (a column needs at least its longest
    word) plus borders and padding exceed ``width``.  Then each column starts at its
    natural width and the widest one that can still give is narrowed, one character at a
    time, until the table fits: first down to its widest cell (the headers wrap), then
    down to its longest word (cells wrap at their spaces, never inside a word)."""
    keep = list(range(len(columns)))
    dropped: list[str] = []
    widths: dict[int, int] = {}
    if width is not None:
        cells = {i: [row[i] for row in rows] for i in keep}
        least = {i: _narrowest(columns[i], cells[i]) for i in keep}
        most = {i: _widest(columns[i], cells[i]) for i in keep}
        by_priority = sorted(keep, key=lambda i: (columns[i].priority, i))
        while len(keep) > 1 and (_table_width(least[i] for i in keep) > width or (
                columns[by_priority[-1]].priority >= OPTIONAL and _table_width(most[i] for i in keep) > width)):
            worst = by_priority.pop()
            keep.remove(worst)
            dropped.append(columns[worst].header)
        for i in sorted((c for c in range(len(columns)) if c not in keep), key=lambda c: (columns[c].priority, c)):
            # a column left out early may fit again beside the narrower ones kept
            if columns[i].priority >= OPTIONAL and _table_width([*(most[k] for k in keep), most[i]]) <= width:
                keep = sorted([*keep, i])
                dropped.remove(columns[i].header)
        widths = {i: most[i] for i in keep}
        # headers wrap first (down to their longest word), then cells (down to theirs)
        cells_whole = {i: max(least[i], _widest(FitColumn(""), cells[i]) if cells[i] else 0) for i in keep}
        for floor in (cells_whole, least):
            while _table_width(widths.values()) > width:
                give = [i for i in keep if widths[i] > floor[i]]
                if not give:
                    break
                widths[max(give, key=lambda i: (widths[i], -i))] -= 1
        if len(keep) == 1 and _table_width(widths.values()) > width:  # one word wider than the terminal: it folds
            widths = {i: max(1, width - 4) for i in keep}
    return _rich_table(title, columns, rows, keep, title_justify, widths), dropped


def wrap_note(text: str, width: int | None, indent: str = "  ") -> str:
    """A table's note, indented, wrapped at spaces to ``width`` terminal cells (a CJK
    character takes two; a word wider than the line is cut); unwrapped when None."""
    if width is None:
        return indent + text
    from rich.cells import cell_len

    lines, line, cont = [], indent, indent + "  "
    for word in text.split():
        while cell_len(cont + word) > width:  # wider than any line: fill this one, cut the rest
            room = width - cell_len(line) - (1 if line.strip() else 0)
            cut = _fit_cells(word, room)
            if not cut and line.strip():
                lines.append(line)
                line = cont
                continue
            cut = cut or word[0]
            lines.append(line + (" " if line.strip() else "") + cut)
            line, word = cont, word[len(cut):]
        if line.strip() and cell_len(line) + 1 + cell_len(word) > width:
            lines.append(line)
            line = cont
        line += (" " if line.strip() else "") + word
    lines.append(line)
    return "\n".join(lines)


def _fit_cells(word: str, room: int) -> str:
    """The longest head of ``word`` at most ``room`` cells wide."""
    from rich.cells import cell_len

    end = 0
    while end < len(word) and cell_len(word[:end + 1]) <= room:
        end += 1
    return word[:end]


def left_out_note(dropped: Sequence[str]) -> str:
    return f"left out at this width: {', '.join(dropped)} (--wide shows every column and full run ids)"


def console_for(width: int | None):
    """A rich Console drawing at ``width`` (None: ``--wide``, unbounded)."""
    from rich.console import Console

    return Console(width=width or UNBOUNDED)
