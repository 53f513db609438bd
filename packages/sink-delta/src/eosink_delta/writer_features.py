"""Which tables eosink's own blind-append commit may write: the protocol's writer features.

A Delta writer must honour every writer feature the table's ``protocol`` names (or, below
writer version 7, implies). eosink's commit (:mod:`eosink_delta.log_commit`) writes add actions
of new files, a ``txn`` and a ``commitInfo``, nothing else. That is correct for a feature that
asks nothing of such a commit (``appendOnly``, ``changeDataFeed``: an add-only commit needs no
change files; ``timestampNtz``; ``deletionVectors``: new files have none;
``vacuumProtocolCheck``; ``domainMetadata``: a blind append changes no domain), and for a
feature the table names but does not use (no invariant, CHECK constraint, generated or
identity column, column mapping off). Anything else (row tracking, in-commit timestamps,
clustering, Iceberg compatibility, V2 checkpoints, a feature newer than this list...) is refused
by name before anything is written: a commit that silently ignored it would break the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from eosink.plugin import ConfigurationError
from eosink_delta.log_view import LogView

#: Writer features a blind append honours by writing nothing more.
HONOURED = frozenset(
    {
        "appendOnly",
        "changeDataFeed",
        "timestampNtz",
        "deletionVectors",
        "vacuumProtocolCheck",
        "domainMetadata",
    }
)
#: Writer features a blind append honours only while the table does not use them.
UNUSED_ONLY = frozenset(
    {"invariants", "checkConstraints", "generatedColumns", "identityColumns", "columnMapping"}
)
#: Reader features whose checkpoints and commits eosink's view of the log reads.
READABLE = frozenset({"timestampNtz", "deletionVectors", "vacuumProtocolCheck", "columnMapping"})
#: The features legacy writer versions (before table features) imply.
LEGACY_WRITER = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
#: Table properties that switch on a feature a blind append cannot honour.
ENABLING = {
    "delta.enableRowTracking": "rowTracking",
    "delta.enableInCommitTimestamps": "inCommitTimestamp",
    "delta.enableIcebergCompatV1": "icebergCompatV1",
    "delta.enableIcebergCompatV2": "icebergCompatV2",
}


def writer_features(protocol: dict[str, Any]) -> set[str]:
    """The writer features a table's protocol asks for, named or implied by its version."""
    version = int(protocol.get("minWriterVersion") or 1)
    if version >= 7:
        return set(protocol.get("writerFeatures") or [])
    return {f for v, names in LEGACY_WRITER.items() if v <= version for f in names}


def _fields(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every field of a Delta schema, nested ones included."""
    for field in schema.get("fields", []):
        yield field
        yield from _nested(field.get("type"))


def _nested(type_: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(type_, dict):
        return
    if type_.get("type") == "struct":
        yield from _fields(type_)
    elif type_.get("type") == "array":
        yield from _nested(type_.get("elementType"))
    elif type_.get("type") == "map":
        yield from _nested(type_.get("keyType"))
        yield from _nested(type_.get("valueType"))


def features_in_use(view: LogView) -> dict[str, str]:
    """The features (of :data:`UNUSED_ONLY`) the table uses, each with where."""
    used: dict[str, str] = {}
    schema = json.loads(view.schema_string or "{}")
    for field in _fields(schema):
        meta = field.get("metadata") or {}
        name = field.get("name")
        if "delta.invariants" in meta:
            used.setdefault("invariants", f"column {name!r}")
        if "delta.generationExpression" in meta:
            used.setdefault("generatedColumns", f"column {name!r}")
        if any(k.startswith("delta.identity.") for k in meta):
            used.setdefault("identityColumns", f"column {name!r}")
    config = view.configuration
    constraints = sorted(k for k in config if k.startswith("delta.constraints."))
    if constraints:
        used["checkConstraints"] = ", ".join(constraints)
    mapping = config.get("delta.columnMapping.mode", "none")
    if mapping not in (None, "", "none"):
        used["columnMapping"] = f"delta.columnMapping.mode={mapping}"
    return used


def check_blind_append(uri: str, view: LogView) -> None:
    """Refuse a table whose protocol asks more of a commit than a blind append writes."""
    protocol = view.protocol
    reader = int(protocol.get("minReaderVersion") or 1)
    writer = int(protocol.get("minWriterVersion") or 1)
    problems: list[str] = []
    if reader > 3:
        problems.append(f"reader version {reader}")
    if writer > 7:
        problems.append(f"writer version {writer}")
    if reader >= 3:
        unreadable = sorted(set(protocol.get("readerFeatures") or []) - READABLE)
        problems.extend(f"reader feature {f!r}" for f in unreadable)
    features = writer_features(protocol)
    problems.extend(f"writer feature {f!r}" for f in sorted(features - HONOURED - UNUSED_ONLY))
    used = features_in_use(view)
    problems.extend(
        f"writer feature {f!r} in use ({where})"
        for f, where in sorted(used.items())
        if f in features or f in ("checkConstraints", "columnMapping")
    )
    for key, feature in sorted(ENABLING.items()):
        if str(view.configuration.get(key, "false")).lower() == "true" and feature not in features:
            problems.append(f"{feature!r} ({key}=true)")
    if problems:
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} needs what eosink's Delta commit does not write: "
            f"{'; '.join(problems)}. eosink commits blind appends (add actions, a txn, a "
            "commitInfo; complete mode through delta-rs, which does not enforce these "
            "either) and refuses a table where that would break a feature. Write to a "
            "table without it, or use engine='delta-spark' on a Spark with Delta. Nothing was "
            "written."
        )


def check_upsert(uri: str, view: LogView) -> None:
    """Refuse a table an upsert's commit (removes of rewritten files) would break: an
    append-only table, or one with the change data feed on (a partial rewrite must write
    change files, which eosink's commit does not)."""
    config = view.configuration
    problems = []
    if str(config.get("delta.appendOnly", "false")).lower() == "true":
        problems.append("it is append-only (delta.appendOnly=true): an upsert removes files")
    if str(config.get("delta.enableChangeDataFeed", "false")).lower() == "true":
        problems.append(
            "its change data feed is on (delta.enableChangeDataFeed=true): an upsert that "
            "rewrites files must write change files, which eosink's commit does not"
        )
    if problems:
        raise ConfigurationError(
            f"sink 'delta': mode 'upsert' cannot write the table at {uri}: {'; '.join(problems)}."
            " Write to a table without it, or use mode='append'. Nothing was written."
        )
