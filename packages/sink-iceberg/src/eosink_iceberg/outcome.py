"""What ``abort`` needs to know of a commit it cannot see: whether it may still land.

A catalog commit whose reply is lost may be applied after the sink looked for its proof (a
SQL catalog on a server whose slow synchronous commit outlives the client's wait, a REST
catalog whose HTTP read timed out): not finding the proof then proves nothing, and deleting
the attempt's files would leave the table pointing at missing files once the commit lands.
Java Iceberg's rule after ``CommitStateUnknownException`` is the same: never clean up.

``abort`` may run in another process than ``commit`` (Spark's data-source door), so the
knowledge is kept in the store, not in memory: before the first catalog commit is sent, the
commit writes a small marker object next to the attempt's data files
(``eosink-<attempt>.commit``); it removes the marker only once every commit it sent is
settled (landed, or refused by the catalog). ``abort`` deletes files only when the marker is
absent. A marker left behind (unknown outcome, a driver killed mid-commit) keeps the files;
``eosink cleanup`` removes both once no snapshot lists them and they are old enough.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from eosink.logs import get_logger
from eosink_iceberg.files import FILE_PREFIX, TableLayout, size_of

log = get_logger("eosink.iceberg")


def marker_path(layout: TableLayout, attempt: str) -> str:
    """Where an attempt's commit marker lives: in the table's data folder, beside its files."""
    from pyiceberg.table.locations import load_location_provider

    provider = load_location_provider(layout.location, layout.properties)
    return provider.new_data_location(f"{FILE_PREFIX}{attempt}.commit")


@attrs.define
class CommitMarker:
    """The marker of one ``commit`` call: written before its first catalog commit is sent;
    ``settled`` says whether every commit sent since has a known outcome."""

    io: Any
    path: str
    written: bool = False
    settled: bool = True

    def before_send(self, attempt: str, table_uuid: str) -> None:
        """Call right before a catalog commit is sent; a failure here sends nothing."""
        if not self.written:
            body = json.dumps({"attempt": attempt, "table": table_uuid}).encode()
            with self.io.new_output(self.path).create(overwrite=True) as out:
                out.write(body)
            self.written = True
        self.settled = False

    def known(self) -> None:
        """The commit just sent landed, or the catalog refused it."""
        self.settled = True

    def finish(self) -> None:
        """At the end of ``commit``: remove the marker when nothing sent is in doubt."""
        if not (self.written and self.settled):
            return
        try:
            self.io.delete(self.path)
        except OSError:  # kept: abort keeps the files, cleanup removes both later
            log.warning("iceberg.commit_marker_left", path=self.path)


def commit_may_land(io: Any, layout: TableLayout, attempt: str) -> bool:
    """Whether a commit of ``attempt`` was sent and its outcome is not known."""
    return size_of(io, marker_path(layout, attempt)) is not None
