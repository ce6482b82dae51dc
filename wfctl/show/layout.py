"""Tables and panels that fit the width they are given without splitting a word or an instant.

rich shrinks a table that is too wide by narrowing its widest columns, whatever they hold, so a
status or a timestamp ends up broken over two lines. A `Fitted` table measures its cells first:
each column gets at least its longest word (a `no_wrap` column, its longest line). A table with
key columns becomes cards when its columns would be squeezed: each row's key cells on one line,
the other cells under it, each after its column's name. A table without them (a list, where rows
are compared) keeps its rows: the columns that may give way are left out, least important first,
and named under it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich import box
from rich.box import Box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

# Where a column's cell goes in a card.
BELOW = 0      # on a line of its own under the key line, after the column's name
KEY = 1        # on the card's first line
KEY_IF_ROOM = 2  # on the first line when it has room, else under it (without the name)
# A table with key columns is laid out when what is left beyond each column's longest word is at
# least a third of what the columns would take to be as wide as they like; a squeezed one reads
# worse than cards.
ROOMY = 3


@dataclass(frozen=True)
class Column:
    """A column of a `Fitted` table, and how it gives way when the width is short."""

    header: str
    # An instant, a status, a duration: never broken over two lines.
    no_wrap: bool = False
    # Batches printed one under another (history --follow) line up when each column keeps this.
    min_width: int = 0
    # None: always shown. Otherwise it may be left out; the highest number goes first.
    drop: int | None = None
    card: int = BELOW
    # In a card, the cell comes after the column's name; a cell that explains itself does not.
    labelled: bool = True
    style: str = ""


class Fitted:
    """A table laid out for the width it is given (see the module's docstring)."""

    def __init__(self, columns: Sequence[Column], *, plain: bool, show_header: bool = True,
                 show_edge: bool = True, squeeze: bool = False) -> None:
        self.columns = list(columns)
        self.plain = plain
        self.show_header = show_header
        self.show_edge = show_edge
        # A table that fits at all is laid out, however little room its columns have.
        self.squeeze = squeeze
        self.rows: list[tuple[Text | Flow, ...]] = []

    def add_row(self, *cells: str | Text | Flow) -> None:
        self.rows.append(tuple(Text(cell) if isinstance(cell, str) else cell for cell in cells))

    def table(self, kept: Sequence[int], *, compact: bool = False) -> Table:
        """The rich table of the `kept` columns, each as wide as rich makes it; `compact`, with
        no blank at its edges."""
        if self.plain:
            grid = Table(box=None, show_edge=False, pad_edge=False, header_style="",
                         padding=(0, 2, 0, 0))
        else:
            grid = Table(box=box.SIMPLE_HEAVY, header_style="bold",
                         show_edge=self.show_edge and not compact, pad_edge=not compact)
        grid.show_header = self.show_header
        for index in kept:
            column = self.columns[index]
            grid.add_column(column.header, no_wrap=column.no_wrap, overflow="fold",
                            style=column.style)
        for row in self.rows:
            grid.add_row(*(row[index] for index in kept))
        return grid

    def _measure(self, console: Console, options: ConsoleOptions, index: int) -> tuple[int, int]:
        """The least and the most width a column's cells (its header too) ask for."""
        column = self.columns[index]
        cells = [Text(column.header)] if self.show_header else []
        cells.extend(row[index] for row in self.rows)
        least = most = column.min_width
        for cell in cells:
            measured = Measurement.get(console, options, cell)
            least = max(least, measured.maximum if column.no_wrap else measured.minimum)
            most = max(most, measured.maximum)
        return least, most

    def laid_out(self, console: Console, options: ConsoleOptions, kept: Sequence[int], *,
                 compact: bool = False) -> tuple[Table, bool] | None:
        """The table of the `kept` columns with widths that split no word, and whether it is
        roomy; None when they do not fit in `options.max_width`."""
        grid = self.table(kept, compact=compact)
        # What the borders and the padding take (rich's own reckoning, so that it agrees).
        overhead = grid._extra_width + sum(grid._get_padding_width(n) for n in range(len(kept)))
        room = options.max_width - overhead
        measured = [self._measure(console, options, index) for index in kept]
        least = sum(low for low, _ in measured)
        if least > room:
            return None
        widths = [low for low, _ in measured]
        spare = room - least
        wanted = sum(high - low for low, high in measured)
        if wanted <= spare:
            widths = [high for _, high in measured]
        elif wanted:
            # Share what is left in proportion to what each column would still take.
            for n, (low, high) in enumerate(measured):
                widths[n] = low + (high - low) * spare // wanted
        for column, width in zip(grid.columns, widths, strict=True):
            column.width = width
        return grid, self.squeeze or spare * ROOMY >= wanted

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        kept = list(range(len(self.columns)))
        if any(column.card == KEY for column in self.columns):
            laid = self.laid_out(console, options, kept)
            if laid is not None and laid[1]:
                yield laid[0]
            else:
                yield from self.cards(options.max_width)
            return
        # Without cards, as many columns as fit are shown, however little room they have: with
        # the blanks at the table's edges if they fit too.
        while (laid := self.laid_out(console, options, kept)
               or self.laid_out(console, options, kept, compact=True)) is None:
            droppable = [n for n in kept if self.columns[n].drop is not None]
            if not droppable:
                # Nothing fits: the fewest columns, as narrow as rich makes them.
                yield from self._with_note(self.table(kept), kept)
                return
            kept.remove(max(droppable, key=lambda n: self.columns[n].drop or 0))
        yield from self._with_note(laid[0], kept)

    def _with_note(self, grid: Table, kept: Sequence[int]) -> Iterator[RenderableType]:
        """The table, and under it the names of the columns left out."""
        yield grid
        left_out = [column.header for n, column in enumerate(self.columns) if n not in kept]
        if left_out:
            yield Text(f"not shown at this width: {', '.join(left_out)}",
                       style="" if self.plain else "dim")

    def cards(self, width: int) -> Iterator[RenderableType]:
        """Each row as a card: the key cells on one line, the others under it."""
        keys = [n for n, column in enumerate(self.columns) if column.card == KEY]
        room = [n for n, column in enumerate(self.columns) if column.card == KEY_IF_ROOM]
        header, key_rows = self._key_texts()
        widths = self._key_widths(keys + room, [header, *key_rows])

        def line_width(shown: list[int]) -> int:
            return sum(widths[n] for n in shown) + 2 * (len(shown) - 1)

        if line_width(sorted(keys + room)) <= width:
            keys, room = sorted(keys + room), []
        # Key cells are padded to line up from card to card, when the line has room for it;
        # then the column names head them too.
        pad = line_width(keys) <= width
        if header and pad:
            yield self._key_line(header, keys, widths)
        label_width = self._label_width(keys + room)
        for row, key_row in zip(self.rows, key_rows, strict=True):
            yield self._key_line(key_row, keys, widths if pad else None)
            below = self._below_key_line(row, keys, room, label_width)
            if below:
                yield Padding(Group(*below), (0, 0, 0, 2))

    def _key_texts(self) -> tuple[list[Text], list[list[Text]]]:
        """The header's cells (none without a header) and each row's, as texts for key lines."""
        header = [Text(column.header, style="" if self.plain else "bold")
                  for column in self.columns] if self.show_header else []
        return header, [[cell.text() if isinstance(cell, Flow) else cell.copy() for cell in row]
                        for row in self.rows]

    def _label_width(self, on_key_line: list[int]) -> int:
        """The width of the names of the cells under the key line, which line up from card to
        card."""
        return max((cell_len(column.header) for n, column in enumerate(self.columns)
                    if column.labelled and n not in on_key_line), default=0)

    def _key_widths(self, shown: list[int], rows: list[list[Text]]) -> dict[int, int]:
        """The widest line of each `shown` column's cells in `rows` (an empty row is no header)."""
        return {n: max([self.columns[n].min_width,
                        *(cell_len(line) for row in rows if row
                          for line in row[n].plain.splitlines())])
                for n in shown}

    def _below_key_line(self, row: tuple[Text | Flow, ...], keys: list[int], room: list[int],
                        label_width: int) -> list[RenderableType]:
        """A card's cells under its key line: the unlabelled ones, then the others after their
        column's name; an empty or '-' cell is left out."""
        labelled = Table.grid(padding=(0, 2, 0, 0))
        labelled.add_column(no_wrap=True, style="" if self.plain else "dim", min_width=label_width)
        labelled.add_column(overflow="fold")
        unlabelled: list[RenderableType] = []
        for n, column in enumerate(self.columns):
            cell = row[n]
            if n in keys or cell.plain.strip() in ("", "-"):
                continue
            if column.labelled and n not in room:
                labelled.add_row(column.header, cell)
            else:
                unlabelled.append(cell)
        return [*unlabelled, labelled] if labelled.row_count else unlabelled

    @staticmethod
    def _key_line(cells: list[Text], keys: list[int], widths: dict[int, int] | None) -> Text:
        line = Text()
        for position, n in enumerate(keys):
            cell = cells[n].copy()
            if position < len(keys) - 1:
                if widths is not None and "\n" not in cell.plain:
                    cell.pad_right(widths[n] - cell.cell_len)
                cell.append("  ")
            line.append_text(cell)
        return line


class Flow:
    """Parts laid out left to right like words, breaking a line only between parts: a chip, or
    an instant with how long ago it was, is never broken over two lines."""

    def __init__(self, parts: Sequence[Text], separator: str = " ") -> None:
        self.parts = list(parts)
        self.separator = separator

    @property
    def plain(self) -> str:
        return self.separator.join(part.plain for part in self.parts)

    def text(self) -> Text:
        """The parts on one line."""
        return Text(self.separator).join(self.parts)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((part.cell_len for part in self.parts), default=0)
        return Measurement(widest, cell_len(self.plain)).with_maximum(options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines: list[Text] = []
        for part in self.parts:
            if lines and lines[-1].cell_len + len(self.separator) + part.cell_len \
                    <= options.max_width:
                lines[-1].append(self.separator)
                lines[-1].append_text(part)
            else:
                lines.append(part.copy())
        yield from lines


class Titled:
    """A panel whose title is never cut: when the title (with its note) is wider than the panel
    can show, the panel shows the bare title and prints the note as its first line; a title that
    does not fit even so goes inside, where it wraps."""

    def __init__(self, title: Text, body: RenderableType, *, note: str | None = None,
                 frame: Box = box.ROUNDED) -> None:
        self.title = title
        self.body = body
        self.note = note
        self.frame = frame

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # A panel shows a title of at most its width less its corners, a rule and a blank each
        # side.
        room = options.max_width - 6
        full = self.title.copy()
        if self.note:
            full.append(f" ({self.note})")
        if full.cell_len <= room:
            yield Panel(self.body, title=full, title_align="left", box=self.frame)
        elif self.title.cell_len <= room:
            note = Text(self.note or "", style="dim")
            yield Panel(Group(note, self.body), title=self.title, title_align="left",
                        box=self.frame)
        else:
            yield Panel(Group(full, self.body), box=self.frame)
