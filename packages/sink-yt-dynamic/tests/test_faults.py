"""Proxy faults through the emulator: 503s, lost replies, tablet transaction conflicts.

Each case runs two batches of rows through the real protocol with a fault armed at a chosen
phase and checks the table holds every source row exactly once and the proof moved forward.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pyarrow as pa
import pytest
from conftest import OUT, make_sink_for, table_rows

from eosink.plugin import BatchContext, hookimpl
from eosink.testing import run_batch
from eosink.testing import LocalRunner

CONFLICT = 1700


def part(batch: int, tablet: int, n: int = 5) -> list[pa.RecordBatch]:
    first = batch * 100
    return [
        pa.record_batch(
            {
                "tablet_index": pa.array([tablet] * n, pa.int64()),
                "row_index": pa.array(range(first, first + n), pa.int64()),
                "id": pa.array([tablet * 10_000 + first + i for i in range(n)], pa.int64()),
                "name": pa.array(["x"] * n),
                "amount": pa.array([1.5] * n),
            }
        )
    ]


class ArmAt:
    """Arms an emulator fault when a phase starts (``write`` of partition 1, or ``commit``)."""

    def __init__(self, faults: Any, phase: str, arm: tuple[str, dict]) -> None:
        self.faults, self.phase, self.arm = faults, phase, arm

    def _fire(self) -> None:
        method, kwargs = self.arm
        getattr(self.faults, method)(**kwargs)

    @hookimpl(wrapper=True)
    def commit(self) -> Generator[None, Any, Any]:
        if self.phase == "commit":
            self._fire()
        return (yield)


FAULTS = {
    "503 on insert_rows": ("respond_503", {"command": "insert_rows", "times": 2}),
    "lost reply after insert_rows": ("lose_reply", {"command": "insert_rows", "when": "after"}),
    "lost reply before insert_rows": ("lose_reply", {"command": "insert_rows", "when": "before"}),
    "503 on commit": ("respond_503", {"command": "commit_transaction", "times": 2}),
    "lost reply after commit": ("lose_reply", {"command": "commit_transaction", "when": "after"}),
    "lost reply before commit": ("lose_reply", {"command": "commit_transaction", "when": "before"}),
    "tablet transaction conflict": (
        "fail_next",
        {
            "command": "commit_transaction",
            "code": CONFLICT,
            "times": 2,
            "message": "Row lock conflict due to concurrent write",
        },
    ),
    "503 on start_transaction": ("respond_503", {"command": "start_transaction"}),
}
# The same faults aimed at the data rows' insert (inside the tablet transaction of a chunk).
DATA_FAULTS = {
    "503 on the data insert": ("respond_503", {"command": "insert_rows", "match": {"path": OUT}}),
    "lost reply after the data insert": (
        "lose_reply",
        {"command": "insert_rows", "when": "after", "match": {"path": OUT}},
    ),
    "conflict on the data insert": (
        "fail_next",
        {"command": "insert_rows", "code": CONFLICT, "match": {"path": OUT}},
    ),
}


CASES = [(f, phase) for f in FAULTS for phase in ("write", "commit")] + [
    (f, "write") for f in DATA_FAULTS
]


@pytest.mark.parametrize(("fault", "phase"), CASES, ids=[f"{f}-{p}" for f, p in CASES])
def test_fault_loses_nothing_and_duplicates_nothing(fault, phase, yt_emulator, yt, out_table):
    expected = []
    for batch in (0, 1):
        partitions = [part(batch, 0), part(batch, 1)]
        expected += [row for p in partitions for b in p for row in b.to_pylist()]
        plugins = []
        if batch == 1:
            if phase == "write":
                method, kwargs = {**FAULTS, **DATA_FAULTS}[fault]
                getattr(yt_emulator.faults, method)(**kwargs)
            else:
                plugins = [ArmAt(yt_emulator.faults, "commit", FAULTS[fault])]
        sink = make_sink_for(yt_emulator)
        ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=batch, query_id="q")
        outcome = run_batch(
            sink, ctx, partitions[0][0].schema, LocalRunner(partitions), plugins=plugins
        )
        assert outcome.status == "committed"
    assert not yt_emulator.faults.pending(), "the fault never fired"
    held = table_rows(yt)
    assert sorted(held, key=lambda r: r["id"]) == sorted(expected, key=lambda r: r["id"])
    proof = make_sink_for(yt_emulator).is_committed(
        BatchContext(sink="yt-dynamic", writer_id="w", batch_id=1)
    )
    assert proof is not None and proof.batch_id == 1 and proof.rows == 10


def test_replay_after_a_failed_commit_rewrites_the_same_rows(yt_emulator, yt, out_table):
    """The commit fails for good (proxy down beyond every retry); the replay ends the same."""
    partitions = [part(0, 0), part(0, 1)]
    sink = make_sink_for(yt_emulator)
    ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=0, query_id="q")

    def reads_progress(params: dict) -> bool:
        return "_eosink_progress" in str(params.get("query"))

    arm = ArmAt(
        yt_emulator.faults,
        "commit",
        ("fail_next", {"command": "select_rows", "times": 10, "code": 1, "match": reads_progress}),
    )
    with pytest.raises(Exception):
        run_batch(sink, ctx, partitions[0][0].schema, LocalRunner(partitions), plugins=[arm])
    yt_emulator.faults.clear()
    assert sink.is_committed(ctx) is None
    assert (
        run_batch(sink, ctx, partitions[0][0].schema, LocalRunner(partitions)).status == "committed"
    )
    assert len(table_rows(yt)) == 10


def _inserted_into(emulator: Any, table: str) -> Callable[[dict], bool]:
    """Matches ``commit_transaction`` of a tablet transaction that inserted rows into ``table``
    (the emulator's request log says which transaction each ``insert_rows`` ran in)."""

    def match(params: dict) -> bool:
        tx = str(params.get("transaction_id"))
        return any(
            e["transaction_id"] == tx and str(e["params"].get("path")) == table
            for e in emulator.requests.of("insert_rows")
        )

    return match


@pytest.mark.parametrize("phase", ["write", "commit"])
def test_real_tablet_transaction_conflict_loses_nothing(phase, yt_emulator, yt, out_table):
    """A rival commits the same keys while the sink's tablet transaction is open, so the sink's
    commit meets a genuine write-write conflict (1700, not an injected error); the sink redoes
    the transaction and the table ends with every row once, with the sink's values.

    ``write``: the rival overwrites the batch's data rows with other values before the first
    data transaction commits. ``commit``: the rival rewrites the stored proof row, unchanged,
    before the proof's transaction commits."""
    rival = yt_emulator.client()
    progress = f"{OUT}_eosink_progress"
    expected: list[dict] = []
    for batch in (0, 1):
        partitions = [part(batch, 0), part(batch, 1)]
        rows = [row for p in partitions for b in p for row in b.to_pylist()]
        expected += rows
        if batch == 1:
            if phase == "write":
                competing = [{**row, "name": "rival", "amount": -1.0} for row in rows]
                table = OUT
            else:
                key = {"output": OUT, "output_id": str(yt.get(f"{OUT}/@id")), "writer_id": "w"}
                competing = list(rival.lookup_rows(progress, [key]))
                assert competing and competing[0]["batch_id"] == 0
                table = progress

            def compete() -> None:  # runs before the sink's commit is applied
                with rival.Transaction(type="tablet", ping=False):
                    rival.insert_rows(table, competing)

            yt_emulator.faults.on_next(
                "commit_transaction", compete, match=_inserted_into(yt_emulator, table)
            )
        sink = make_sink_for(yt_emulator)
        ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=batch, query_id="q")
        outcome = run_batch(sink, ctx, partitions[0][0].schema, LocalRunner(partitions))
        assert outcome.status == "committed"
    assert not yt_emulator.faults.pending(), "the rival never wrote"
    conflicts = [
        e for e in yt_emulator.requests.of("commit_transaction") if e["error_code"] == CONFLICT
    ]
    assert len(conflicts) == 1, "the sink's commit did not meet the conflict"
    held = table_rows(yt)
    assert sorted(held, key=lambda r: r["id"]) == sorted(expected, key=lambda r: r["id"])
    proof = make_sink_for(yt_emulator).is_committed(
        BatchContext(sink="yt-dynamic", writer_id="w", batch_id=1)
    )
    assert proof is not None and proof.batch_id == 1 and proof.rows == 10
