"""What other programs do to an Iceberg table between any two steps of a generated history
(:mod:`eosink.testing.simulation_foreign`), each by pyiceberg through the same catalog: append
rows of their own, expire snapshots, tag or branch the current snapshot, add a nullable column,
and change the partition spec (``bucket[4](id)`` added, or removed again: a damage for a sink
pinned to its ``partition_by``, which must refuse the table clearly). And the catalog itself
answers late: a commit whose client saw it fail (the store fault ``late_apply`` of
:mod:`iceberg_faults`: a slow synchronous commit behind the SQL catalog, a REST catalog whose
reply timed out) is applied now, between two steps or inside another commit; it lands if the
head it was planned on still holds.

pyiceberg (0.12) has no manifest rewrite, so that maintenance is not among them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from iceberg_faults import STORE_PROPERTY, land_late_commits
from iceberg_helpers import TABLE, load

from eosink.testing.faultfs import store_of
from eosink.testing.simulation import ForeignHand, ForeignOutcome, ForeignStep, HistorySpec

NO_TABLE = ForeignOutcome(skipped="no table yet")


def iceberg_foreign_steps(spec: HistorySpec, catalog: dict[str, str]) -> Mapping[str, ForeignStep]:
    """The foreign steps on the history's table in ``catalog``."""

    def table() -> Any:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return load(catalog, TABLE)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def append(hand: ForeignHand) -> ForeignOutcome:
        """Another application appends with pyiceberg's own writer (``Table.append``), its
        rows shaped as the table is now (columns another program added: null)."""
        t = table()
        if t is None:
            return NO_TABLE
        rows = hand.rows()
        schema = t.schema().as_arrow()
        columns = [
            rows.column(f.name).cast(f.type)
            if f.name in rows.column_names
            else pa.nulls(rows.num_rows, f.type)
            for f in schema
        ]
        t.append(pa.Table.from_arrays(columns, schema=schema))
        return ForeignOutcome(appended=rows)

    def expire_snapshots(hand: ForeignHand) -> ForeignOutcome:
        """Every snapshot but the current one and those a tag or branch holds, expired."""
        t = table()
        if t is None:
            return NO_TABLE
        t.maintenance.expire_snapshots().older_than(dt.datetime.now(dt.timezone.utc)).commit()
        return ForeignOutcome()

    def tag_and_branch(hand: ForeignHand) -> ForeignOutcome:
        """A tag and a branch on the current snapshot (an audit's, a test run's)."""
        t = table()
        if t is None or t.current_snapshot() is None:
            return NO_TABLE
        n = len(t.refs())
        snapshot = t.current_snapshot().snapshot_id
        t.manage_snapshots().create_tag(snapshot, f"foreign-tag-{n}").create_branch(
            snapshot, f"foreign-branch-{n}"
        ).commit()
        return ForeignOutcome()

    def add_column(hand: ForeignHand) -> ForeignOutcome:
        """A nullable column the stream does not have, added at the end."""
        from pyiceberg.types import StringType

        t = table()
        if t is None:
            return NO_TABLE
        with t.update_schema() as update:
            update.add_column(f"foreign_{len(t.schema().fields)}", StringType())
        return ForeignOutcome()

    def evolve_spec(hand: ForeignHand) -> ForeignOutcome:
        """The partition spec changed: ``bucket[4](id)`` added (to an unpartitioned table
        too), or removed when there. A sink given ``partition_by`` refuses a table
        partitioned otherwise, naming both: a damage, which the kit does not let a step do
        inside a commit (the sink's own tests change the spec there:
        ``test_other_writers.py``). A sink given none follows the table's spec: there the
        change is no damage, between steps or inside a commit (a batch written under the old
        spec must then be committed under the one it was written for, or written again)."""
        from pyiceberg.transforms import BucketTransform

        t = table()
        if t is None:
            return NO_TABLE
        pinned = bool(spec.partition_by)
        if hand.inside_commit and pinned:
            return ForeignOutcome(skipped="a damage inside a commit")
        ours = [f for f in t.spec().fields if f.name == "id_bucket_foreign"]
        with t.update_spec() as update:
            if ours:
                update.remove_field("id_bucket_foreign")
            else:
                update.add_field("id", BucketTransform(4), "id_bucket_foreign")
        return ForeignOutcome(damaged=pinned)

    def late_commits_land(hand: ForeignHand) -> ForeignOutcome:
        """The catalog applies the commits it was still applying when their replies failed
        (``late_apply``), in order; each lands only if its requirements still hold."""
        if not land_late_commits(store_of(catalog[STORE_PROPERTY])):
            return ForeignOutcome(skipped="no commit in flight")
        return ForeignOutcome()

    return {
        "late_commits_land": late_commits_land,
        "append": append,
        "expire_snapshots": expire_snapshots,
        "tag_and_branch": tag_and_branch,
        "add_column": add_column,
        "evolve_spec": evolve_spec,
    }
