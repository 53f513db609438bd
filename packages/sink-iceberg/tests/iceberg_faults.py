"""An Iceberg table whose every store request can fail: the warehouse in the kit's faulty
object store (:mod:`eosink.testing.faultfs`) and the SQL catalog's loads and commits counted as
requests of the same store.

* :class:`FaultyFileIO` is pyiceberg's own fsspec FileIO, taught the ``faulty://`` scheme: data
  files, manifests, manifest lists and metadata files are written and read through it (by the
  sink's executors, pyiceberg's commit and the readers alike), one GET/HEAD/PUT/DELETE per call.
* :class:`FaultyCatalog` is pyiceberg's SQL catalog (on SQLite) whose ``load_table`` is a GET
  and whose ``commit_table`` is a PUT of the key ``<store>/catalog/<table>``. A fault on the
  commit fails it as a catalog does: ``error`` refuses it (``CommitFailedException``, nothing
  applied), ``lost_reply`` applies it and then fails (``CommitStateUnknownException``: the
  reply was lost), ``short_write`` fails it unclearly without applying it
  (``CommitStateUnknownException`` too: the client cannot tell the two apart).

Both are named by the catalog properties (``py-catalog-impl``, ``py-io-impl``), so every sink
instance, executor and reader built from the properties goes through them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.io.fsspec import FsspecFileIO

from eosink.testing.faultfs import (
    PROTOCOL,
    FaultyFileSystem,
    InjectedStoreFault,
    ObjectStore,
    StoreFault,
    store_of,
)

#: The catalog property naming the store whose request counter the catalog's calls join.
STORE_PROPERTY = "eosink-test.store"
#: The regular expression of a catalog request's key (a :class:`StoreFault` ``path``).
CATALOG_KEYS = r"^[^/]+/catalog/"
#: The fault kind of a commit the catalog applies only after its client saw it fail.
LATE_APPLY = "late_apply"

#: Per store: the commits failed with :data:`LATE_APPLY`, not applied yet.
_late: dict[str, list[Callable[[], Any]]] = {}


class FaultyFileIO(FsspecFileIO):
    """pyiceberg's fsspec FileIO with ``faulty://`` as one more scheme."""

    def __init__(self, properties: Any) -> None:
        super().__init__(properties)
        self._scheme_to_fs[PROTOCOL] = lambda _properties: FaultyFileSystem()


class FaultyCatalog(SqlCatalog):
    """pyiceberg's SQL catalog whose table loads and commits are requests of a faulty store."""

    def _store(self) -> ObjectStore:
        return store_of(self.properties[STORE_PROPERTY])

    def _key(self, identifier: Any) -> str:
        name = identifier if isinstance(identifier, str) else ".".join(identifier)
        return f"{self.properties[STORE_PROPERTY]}/catalog/{name}"

    def load_table(self, identifier: Any) -> Any:
        return self._store().request(
            "get", self._key(identifier), lambda: super(FaultyCatalog, self).load_table(identifier)
        )

    def commit_table(self, table: Any, requirements: Any, updates: Any) -> Any:
        store = self._store()
        fired = len(store.fired)
        try:
            return store.request(
                "put",
                self._key(table.name()),
                lambda: super(FaultyCatalog, self).commit_table(table, requirements, updates),
            )
        except InjectedStoreFault as exc:
            kind = store.fired[-1].kind if len(store.fired) > fired else "error"
            if kind == "error":
                raise CommitFailedException(f"commit refused: {exc}") from exc
            if kind == LATE_APPLY:
                _late.setdefault(store.name, []).append(
                    lambda: super(FaultyCatalog, self).commit_table(table, requirements, updates)
                )
            raise CommitStateUnknownException(f"commit outcome unknown: {exc}") from exc


def faulty_catalog(store: ObjectStore, folder: str) -> dict[str, str]:
    """Catalog properties: the SQL catalog on SQLite in ``folder``, the warehouse in ``store``."""
    return {
        "py-catalog-impl": f"{__name__}.FaultyCatalog",
        "py-io-impl": f"{__name__}.FaultyFileIO",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": store.url("warehouse"),
        STORE_PROPERTY: store.name,
    }


def land_late_commits(store: ObjectStore) -> list[bool]:
    """The catalog finishes the commits it was still applying (:data:`LATE_APPLY`), in order:
    for each, whether it landed (a commit whose requirements no longer hold is refused then)."""
    landed = []
    for apply in _late.pop(store.name, []):
        try:
            apply()
        except CommitFailedException:
            landed.append(False)
        else:
            landed.append(True)
    return landed


def drop_late_commits(store: ObjectStore) -> None:
    """Forget the late commits of ``store`` not applied (its history is over)."""
    _late.pop(store.name, None)


def catalog_fault(kind: str, after: int = 1) -> StoreFault:
    """A fault of the ``after``-th catalog commit from now."""
    return StoreFault(kind, after=after, ops=("put",), path=CATALOG_KEYS)  # type: ignore[arg-type]
