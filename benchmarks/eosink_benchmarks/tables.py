"""A report table: title, header, rows and notes, rendered as Markdown."""

from __future__ import annotations

import attrs


@attrs.frozen
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |"]
        lines.append("|" + "---|" * len(self.header))
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines.append("")
            lines += list(self.notes)
        return "\n".join(lines) + "\n"


def ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def verdict(ok: bool) -> str:
    return "met" if ok else "**MISSED**"


@attrs.frozen
class Target:
    """One of the issue's targets and what this run measured against it (``ok`` None: n/a)."""

    section: str
    what: str
    target: str
    measured: str
    ok: bool | None

    def row(self) -> tuple[str, ...]:
        status = "n/a" if self.ok is None else verdict(self.ok)
        return (self.section, self.what, self.target, self.measured, status)
