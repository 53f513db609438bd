"""The judge of a generated history (:mod:`eosink.testing.simulation`): after every step the
target's independent reader must see every batch that reported success exactly once, every
batch in doubt wholly or not at all, and nothing else; ``is_committed``, asked from a fresh
process, must agree with what readers see."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from hypothesis.stateful import invariant, precondition, rule

from eosink.model import BatchContext
from eosink.process import simulated_process
from eosink.registry import plugin_manager
from eosink.testing.arrow_data import comparable
from eosink.testing.simulation_model import batch_of

if TYPE_CHECKING:
    from eosink.testing.simulation import SinkSimulation
    from eosink.testing.simulation_model import HistorySpec, SimTarget, Writer


class HistoryJudge:
    """The invariant and the audit of :class:`~eosink.testing.simulation_history.History`
    (a mixin: the history holds the state judged)."""

    kit: SinkSimulation
    spec: HistorySpec
    target: SimTarget | None
    writers: list[Writer]
    data: dict[tuple[int, int], list[list[pa.RecordBatch]]]
    status: dict[tuple[int, int], str]
    damaged: bool
    stats: Counter[str]
    workers: Iterator[int]  # numbers of fresh processes
    _in: Callable[[str, Callable[[], Any]], Any]
    _context: Callable[..., BatchContext]

    @invariant()
    def readers_see_each_batch_once(self) -> None:
        self.stats["steps"] += 1
        if self.target is None or self.damaged:
            return
        self.check_rows()

    @precondition(lambda self: not self.damaged)
    @rule()
    def audit(self) -> None:
        """``is_committed``, asked from a fresh process, agrees with what readers see."""
        held = self._held()
        pid = f"auditor-{next(self.workers)}"
        for writer in self.writers:
            for batch in range(writer.batch + 1):
                if (writer.index, batch) not in self.data:
                    continue
                sink = self._in(pid, self.target.sink)
                ctx = self._context(writer, sink, batch)
                with simulated_process(pid):
                    proof = plugin_manager(sink).hook.is_committed(ctx=ctx)
                rows = self._expected(writer.index, batch)
                has_rows = bool(held.get((writer.index, batch)))
                if self.kit.simulation_visible_before_commit and proof is None:
                    has_rows = False  # rows without their proof: a batch not committed yet
                if rows and (proof is not None) != has_rows:
                    raise AssertionError(
                        f"{writer.writer_id} batch {batch}: is_committed says "
                        f"{'committed' if proof else 'not committed'}, readers see "
                        f"{'its rows' if has_rows else 'none of its rows'}"
                    )
                if self.status.get((writer.index, batch)) == "committed" and proof is None:
                    raise AssertionError(
                        f"{writer.writer_id} batch {batch} reported success but has no proof"
                    )

    def check_rows(self) -> None:
        held = self._held()
        unknown = set(held) - set(self.data)
        assert not unknown, f"readers see rows of batches never written: {sorted(unknown)}"
        for key, rows in self.data.items():
            expected = self._expected(*key)
            got = held.get(key, Counter())
            status = self.status.get(key)
            writer_id = self.writers[key[0]].writer_id
            if got == expected or (not got and status != "committed"):
                continue
            partial = self.kit.simulation_visible_before_commit and status != "committed"
            if partial and not got - expected:
                continue  # part of a batch in doubt, each row once (every row has its own id)
            lost = expected - got
            extra = got - expected
            raise AssertionError(
                f"{writer_id} batch {key[1]} ({status or 'never reported'}): readers see "
                f"{sum(got.values())} of its {sum(expected.values())} rows, "
                f"{sum(extra.values())} extra (duplicates or changed values, e.g. "
                f"{list(extra)[:2]}), {sum(lost.values())} missing (e.g. {list(lost)[:2]})"
            )

    def _expected(self, writer: int, batch: int) -> Counter:
        rows: Counter = Counter()
        for partition in self.data.get((writer, batch), []):
            for record_batch in partition:
                for row in record_batch.to_pylist():
                    rows[self._comparable(self.kit.simulation_row(self.spec, row))] += 1
        return rows

    def _comparable(self, row: dict[str, Any]) -> tuple:
        return tuple(comparable(row.get(name)) for name in self.spec.schema.names)

    def _held(self) -> dict[tuple[int, int], Counter]:
        read = self.target.read()
        if isinstance(read, pa.Table):
            read = read.select(self.spec.schema.names).cast(self.spec.schema).to_pylist()
        held: dict[tuple[int, int], Counter] = {}
        for row in read:
            held.setdefault(batch_of(row["id"]), Counter())[self._comparable(row)] += 1
        return held
