"""Sections kept from an earlier report (``report --keep FILE``).

A full run takes over an hour on a 2-core machine. When a change touches some sections only,
``--sections`` measures those, and ``--keep`` carries the others over from the committed report
as they stand: their text, their rows of the targets table and of the sections' load table,
each load row marked with the date of the run that measured it. The report then says of every
section which run it comes from; no figure of a kept section is remeasured or edited.

Sections are told apart by their numbers: a ``##`` heading or a target's section starts with
the number of the section that made it (``1.``, ``1b.``, ``1c.``: ``throughput``).
"""

from __future__ import annotations

import re

import attrs

#: The report's sections (``report.SECTIONS``) and the numbers their headings and targets
#: start with.
NUMBERS = {
    "throughput": ("1.", "1c."),
    "postgres": ("1b.",),
    "upsert": ("1d.",),
    "s3": ("1e.",),
    "overhead": ("2.",),
    "history": ("3.", "3b."),
    "yt": ("4.",),
    "recovery": ("5.",),
    "reference": ("6.",),
}


def order(title: str) -> tuple[int, str]:
    """Where a ``##`` part goes in the report: by its number (``1.`` < ``1b.`` < ``2.``)."""
    number = re.match(r"(\d+)([a-z]*)\.", title)
    return (int(number.group(1)), number.group(2)) if number else (99, title)


def section_of(text: str) -> str | None:
    """The section a heading or a target's section text belongs to (None: none)."""
    number = text.split(" ", 1)[0]
    return next((name for name, numbers in NUMBERS.items() if number in numbers), None)


def _rows(lines: list[str], title: str) -> list[tuple[str, ...]]:
    """The cells of the rows of the table titled ``### {title}...`` (header left out)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(f"### {title}")), None)
    if start is None:
        return []
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table.append(tuple(cell.strip() for cell in line.strip().strip("|").split(" | ")))
        elif table:
            break
    return table[2:]  # the header and its separator


@attrs.frozen
class Kept:
    """What an earlier report holds, by section."""

    date: str
    blocks: dict[str, list[tuple[str, str]]]  # (title, Markdown) of each ``##`` part, by section
    targets: dict[str, list[tuple[str, ...]]]  # rows of the targets table, by section
    loads: dict[str, tuple[str, ...]]  # the row of the sections' load table, by section

    def load_row(self, name: str) -> tuple[str, ...] | None:
        """The section's load row, its name marked with the run it comes from."""
        row = self.loads.get(name)
        if row is None or "(run of " in row[0]:  # kept before: marked already
            return row
        return (f"{row[0]} (run of {self.date})", *row[1:])


def read(path: str) -> Kept:
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    date = re.search(r"^- date: (.+)$", text, re.M)
    blocks: dict[str, list[tuple[str, str]]] = {}
    title, part = "", []
    for line in [*lines, "## end"]:
        if line.startswith("## "):
            name = section_of(title)
            if name is not None:
                blocks.setdefault(name, []).append((title, "\n".join(part).rstrip("\n") + "\n"))
            title, part = line[3:], []
        part.append(line)
    targets: dict[str, list[tuple[str, ...]]] = {}
    for row in _rows(lines, "Targets"):
        name = section_of(row[0])
        if name is not None:
            targets.setdefault(name, []).append(row)
    loads = {row[0].split(" (run of ")[0]: row for row in _rows(lines, "Sections: wall time")}
    return Kept(
        date=date.group(1) if date else "an earlier run",
        blocks=blocks,
        targets=targets,
        loads=loads,
    )
