"""The iceberg sink passes the kit's generated histories (:mod:`eosink.testing.simulation`),
judged by pyiceberg's scan (which plans files from the manifests the commits wrote), never by
eosink_iceberg's helpers.

What a history draws besides the kit's dimensions (writers, crashes, zombies, commits from
fresh workers, cleanup, the clock, damage): how the partition columns are partitioned
(identity, or the transform that fits their type: bucket, truncate, year/month/day/hour), small
row groups, whether the commit retries on a conflict (0 or 3 times), and whether it expires
snapshots beyond the newest 1 or 3 (``keep_snapshots``). The damage a user does
by hand: a partition field of a transform this sink does not compute (``void``).

The table lives in the kit's faulty object store, its catalog's loads and commits counted as
requests of the same store (:mod:`iceberg_faults`): besides the kit's faults on any request
(data files, manifests, manifest lists, metadata files, written and read), a batch may meet a
fault aimed at the catalog's commit (refused; applied with its reply lost; failed unclearly
without applying) or at the metadata folder's writes and reads.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from eosink_iceberg.sink import IcebergSink
from hypothesis import strategies as st
from iceberg_faults import CATALOG_KEYS, faulty_catalog
from iceberg_helpers import TABLE, load, read_pyiceberg

from eosink.testing.arrow_data import COLUMN_TYPES, SCALAR_TYPES
from eosink.testing.faultfs import ObjectStore, StoreFault
from eosink.testing.simulation import HistorySpec, SimTarget, SinkSimulation

#: Every type of the kit: the type map takes them all.
ICEBERG_TYPES = tuple(COLUMN_TYPES)
#: What it partitions by (identity takes every primitive type; the transforms those they fit).
PARTITION_TYPES = SCALAR_TYPES
#: The transform a partition column of a type gets in a "transform" history.
TRANSFORMS = {
    "int8": "bucket(3, {})",
    "int16": "truncate(10, {})",
    "int32": "bucket(5, {})",
    "int64": "truncate(1000, {})",
    "string": "truncate(1, {})",
    "binary": "bucket(2, {})",
    "date": "month({})",
    "timestamp": "hour({})",
    "timestamp_utc": "year({})",
    "decimal": "bucket(4, {})",
}


def partition_fields(spec: HistorySpec, style: str) -> list[str]:
    """``partition_by`` of a history: its columns as they are, or through a transform."""
    out = []
    for name in spec.partition_by:
        kind = next(n for n, (t, _) in COLUMN_TYPES.items() if t == spec.schema.field(name).type)
        pattern = TRANSFORMS.get(kind, "{}") if style == "transform" else "{}"
        out.append(pattern.format(name))
    return out


class TestIcebergSimulation(SinkSimulation):
    simulation_types = ICEBERG_TYPES
    simulation_partition_types = PARTITION_TYPES
    simulation_examples = 15
    #: The sink under test (a test of the simulation's teeth swaps in a broken one).
    sink_class: type[IcebergSink] = IcebergSink

    def simulation_store_faults(self) -> st.SearchStrategy[StoreFault]:
        kinds = st.sampled_from(["error", "lost_reply", "short_write"])
        # the catalog commit: the first, or (less often) a retry after a conflict
        commit = st.builds(
            StoreFault,
            kind=kinds,
            after=st.sampled_from([1, 1, 2]),
            ops=st.just(("put",)),
            path=st.just(CATALOG_KEYS),
        )
        # manifests, manifest lists and metadata files, written or read
        metadata = st.builds(
            StoreFault,
            kind=kinds,
            after=st.integers(1, 4),
            ops=st.sampled_from([("put",), ("get", "head")]),
            path=st.just("/metadata/"),
        )
        # half of the store faults at the commit, the decisive request a uniform draw seldom hits
        return st.one_of(commit, st.one_of(super().simulation_store_faults(), metadata))

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries(
            {
                "row_group_rows": st.sampled_from([1_000_000, 2]),
                "commit_retries": st.sampled_from([0, 3]),
                "keep_snapshots": st.sampled_from([0, 0, 1, 3]),
                "partition_style": st.sampled_from(["identity", "transform"]),
            }
        )

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        folder = tempfile.mkdtemp(prefix="eosink-iceberg-sim-")
        store = ObjectStore.create()
        catalog = faulty_catalog(store, folder)
        sink_class = self.sink_class
        options = dict(spec.options)
        fields = partition_fields(spec, options.pop("partition_style", "identity"))

        def make_sink() -> IcebergSink:
            return sink_class(
                table=TABLE,
                catalog=catalog,
                create_namespace=True,
                partition_by=fields,
                **options,
            )

        def damage() -> None:
            from pyiceberg.transforms import VoidTransform

            with load(catalog).update_spec() as update:
                update.add_field("id", VoidTransform(), "id_void")

        def close() -> None:
            store.drop()
            shutil.rmtree(folder, ignore_errors=True)

        return SimTarget(
            sink=make_sink,
            read=lambda: read_pyiceberg(catalog),
            store=store,
            damage=damage,
            close=close,
        )
