"""What the operator hooks (``target_status``, ``verify_target``, ``cleanup_target``) return.

The ``eosink`` command prints these as tables, or as JSON with ``--json``; a sink fills them
from its own store. Plain attrs classes of strings and numbers, so that ``attrs.asdict`` gives
the JSON form.
"""

from __future__ import annotations

from typing import Any

import attrs

from eosink.model import Proof


@attrs.frozen
class TargetStatus:
    """A target's proofs (the last committed batch of each writer) and the sink's own state.

    ``details`` holds what only this sink knows, as name -> value (e.g. the files sink's
    manifest: latest entry, last compaction, size; Delta's txns; YT's open transactions).
    """

    target: str
    writers: tuple[Proof, ...]
    details: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Verification:
    """Whether what the proofs say is in the target is there: ``problems`` empty means yes."""

    target: str
    checked: int  # how many objects (files, rows, transactions) were checked
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


@attrs.frozen
class Leftover:
    """Something a failed attempt left behind: a file, a staging folder, a transaction."""

    path: str
    kind: str  # e.g. "orphan file", "staging folder", "transaction"
    size: int | None = None
    age_s: float | None = None


@attrs.frozen
class CleanupReport:
    """What a cleanup found: removable leftovers (removed when ``deleted``) and kept ones.

    ``kept`` lists leftovers younger than the threshold, which a live writer may still publish,
    and anything the sink does not own; they are never removed.
    """

    target: str
    removable: tuple[Leftover, ...]
    kept: tuple[Leftover, ...] = ()
    deleted: bool = False

    def paths(self, kind: str) -> tuple[str, ...]:
        """The paths of the leftovers (removable or kept) of one ``kind``, in report order."""
        return tuple(x.path for x in (*self.removable, *self.kept) if x.kind == kind)

    def summary(self) -> str:
        """One line: ``would delete 2 orphan file(s), 1234 bytes; kept 1 foreign file(s)``."""
        return f"{'deleted' if self.deleted else 'would delete'} {_counts(self.removable)}" + (
            f"; kept {_counts(self.kept)}" if self.kept else ""
        )


def _counts(leftovers: tuple[Leftover, ...]) -> str:
    kinds: dict[str, int] = {}
    for x in leftovers:
        kinds[x.kind] = kinds.get(x.kind, 0) + 1
    text = ", ".join(f"{n} {kind}(s)" for kind, n in kinds.items()) or "nothing"
    sizes = [x.size for x in leftovers if x.size is not None]
    return f"{text}, {sum(sizes)} bytes" if sizes else text
