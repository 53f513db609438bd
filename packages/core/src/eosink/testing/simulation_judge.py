"""The judge of a generated history (:mod:`eosink.testing.simulation`): after every step the
target's independent reader must see every batch that reported success exactly once, every
batch in doubt wholly or not at all, and nothing else; ``is_committed``, asked from a fresh
process, must agree with what readers see."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from eosink.model import BatchContext
from eosink.process import simulated_process
from eosink.registry import plugin_manager
from eosink.testing.arrow_data import as_float32, comparable
from eosink.testing.simulation_foreign import FOREIGN_WRITER
from eosink.testing.simulation_keyed import keyed_mismatch
from eosink.testing.simulation_model import Predicate, batch_of

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
    #: the sink replaces rows by the kit's key column (:mod:`eosink.testing.simulation_keyed`)
    keyed: bool
    landings: list[tuple[tuple[int, int], bool]]
    stats: Counter[str]
    workers: Iterator[int]  # numbers of fresh processes
    _in: Callable[[str, Callable[[], Any]], Any]
    _context: Callable[..., BatchContext]
    _refused: Callable[[Writer, BaseException], bool]

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
                options = self.spec.sink_options(writer.index)
                sink = self._in(pid, lambda: self.target.make_sink(options))
                ctx = self._context(writer, sink, batch)
                try:
                    with simulated_process(pid):
                        proof = plugin_manager(sink).hook.is_committed(ctx=ctx)
                except Exception as exc:
                    if self._refused(writer, exc):
                        break  # a clear refusal this writer's options earn: it writes no more
                    raise
                rows = self._expected(writer.index, batch)
                has_rows = bool(held.get((writer.index, batch)))
                if self.kit.simulation_visible_before_commit and proof is None:
                    has_rows = False  # rows without their proof: a batch not committed yet
                if (self.keyed or self._complete) and proof is not None:
                    has_rows = True  # later batches may have replaced every row it wrote
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

    @precondition(
        lambda self: not self.damaged and self.target is not None and self.target.filtered
    )
    @rule(data=st.data())
    def filtered_read(self, data: st.DataObject) -> None:
        """Every filtered reader of the target, given a predicate on one column (equal to a
        value the table holds, null, between two values it holds), returns exactly the rows
        a full scan filtered in memory does: statistics, partition values and indexes a
        reader skips files by must not make it skip a row that passes."""
        rows = self._rows(self.target.read())
        self._check_filtered(rows, data.draw(predicates(self.spec.schema, rows), label="predicate"))

    def check_filtered_sweep(self) -> None:
        """Every column with every predicate kind: ``IS NULL``, equal to each value the
        table holds (up to 8 a column), between its least and greatest (at the history's end,
        where each batch's files hold what the history wrote)."""
        if self.target is None or not self.target.filtered:
            return
        rows = self._rows(self.target.read())
        for predicate in sweep(self.spec.schema, rows):
            self._check_filtered(rows, predicate)

    def _check_filtered(self, rows: list[dict[str, Any]], predicate: Predicate) -> None:
        expected = Counter(
            self._comparable(r) for r in rows if predicate.matches(r.get(predicate.column))
        )
        self.stats["filtered_reads"] += 1
        for name, reader in self.target.filtered.items():
            read = reader(predicate)
            if read is None:
                continue  # a predicate this reader cannot push down (its limit, not the sink's)
            got = Counter(self._comparable(r) for r in self._rows(read))
            if got != expected:
                lost, extra = expected - got, got - expected
                raise AssertionError(
                    f"{name} WHERE {predicate}: reads {sum(got.values())} rows, a full scan "
                    f"filtered in memory {sum(expected.values())}; {sum(lost.values())} "
                    f"missing (e.g. ids {sorted(r[0] for r in lost)[:3]}), "
                    f"{sum(extra.values())} extra (e.g. ids {sorted(r[0] for r in extra)[:3]})"
                )

    @property
    def _complete(self) -> bool:
        """Whether some writer's batches replace the table (complete mode, or mixed)."""
        return self.spec.output_mode != "append"

    def _replaces(self, key: tuple[int, int]) -> bool:
        """Whether batch ``key`` replaces every row before it (its writer's complete mode)."""
        return self.spec.mode_of(key[0]) == "complete"

    def check_rows(self) -> None:
        if self.keyed:
            self.check_keyed_rows()
            return
        if self._complete:
            self.check_complete_rows()
            return
        held = self._held()
        unknown = set(held) - set(self.data)
        assert not unknown, f"readers see rows of batches never written: {sorted(unknown)}"
        for key, rows in self.data.items():
            expected = self._expected(*key)
            got = held.get(key, Counter())
            status = self.status.get(key)
            foreign = key[0] >= len(self.writers)
            writer_id = "foreign" if foreign else self.writers[key[0]].writer_id
            own = None if foreign else self.spec.own_options(key[0])
            writer_id += f" (options {own})" if own else ""
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

    def check_complete_rows(self) -> None:
        """Complete mode: each batch replaces every row before it, so readers see the rows of
        one batch, whole: the last to land (the last commit seen to land, or an attempt in
        doubt after it, which may have landed later), and never a batch older than one its
        writer committed after it (a zombie's stale result over a newer one). Rows appended
        (by another program, or by an append-mode writer of a mixed history) are seen whole
        until a complete-mode batch lands after them, and never after that
        (:meth:`check_appends_under_complete`)."""
        held = self._held()
        replacing = {k: v for k, v in held.items() if self._replaces(k)}
        assert len(replacing) <= 1, (
            f"complete mode: readers see rows of {len(replacing)} complete-mode batches "
            f"({sorted(replacing)}); each replaces every row before it"
        )
        visible = next(iter(replacing), None)
        self.check_appends_under_complete(
            {k: v for k, v in held.items() if not self._replaces(k)}, visible
        )
        landings = self._replacing_landings()
        candidates = self._last_landed()
        if visible is None:
            nothing_landed = not any(sure for _, sure in landings)
            assert nothing_landed or any(not self._expected(*k) for k in candidates), (
                f"complete mode: readers see no rows of a complete-mode batch; the last to "
                f"land was one of {sorted(candidates)}, which wrote rows (landings, True where "
                f"seen: {landings[-8:]})"
            )
            return
        key, got = visible, replacing[visible]
        expected = self._expected(*key)
        assert got == expected, (
            f"complete mode: readers see {sum(got.values())} rows of batch {key}, which "
            f"wrote {sum(expected.values())} ({sum((got - expected).values())} extra or "
            f"changed, {sum((expected - got).values())} missing)"
        )
        assert key in candidates, (
            f"complete mode: readers see batch {key}; the last to land was one of "
            f"{sorted(candidates)}"
        )
        newer = [b for (w, b), sure in landings if sure and w == key[0] and b > key[1]]
        assert not newer, (
            f"complete mode: readers see batch {key[1]} of writer {key[0]} over its batch "
            f"{max(newer)}, committed before it: a stale result replaced a newer one"
        )

    def check_appends_under_complete(
        self, held: dict[tuple[int, int], Counter[tuple[Any, ...]]], visible: Any
    ) -> None:
        """An appended batch (a foreign append, or an append-mode writer's batch beside
        complete-mode writers) is seen whole while no complete-mode batch landed after it,
        and not at all once one did (one in doubt after it: whole or not at all). Where it
        may have landed: at its commit seen to land; an attempt in doubt at any of its
        attempts; a foreign append made inside a commit, before or after that commit's
        publication. ``visible``: the complete-mode batch readers see, if any: an append
        surely before it is gone, one surely after it is seen."""
        held = dict(held)
        spans = self._append_spans()
        first_visible = last_visible = None
        if visible is not None:
            at = [(i, sure) for i, (k, sure) in enumerate(self.landings) if k == visible]
            sure_at = [i for i, sure in at if sure]  # seen to land there: not before
            first_visible = sure_at[0] if sure_at else at[0][0] if at else None
            last_visible = at[-1][0] if at else None
        replacing = [(i, sure) for i, (k, sure) in enumerate(self.landings) if self._replaces(k)]
        for key, (earliest, latest, certain) in spans.items():
            got, expected = held.pop(key, Counter()), self._expected(*key)
            name = "another program's append" if key[0] == FOREIGN_WRITER else "append"
            label = f"{name} (writer {key[0]}, batch {key[1]})"
            if got:
                assert got == expected, (
                    f"complete mode: readers see {sum(got.values())} of the "
                    f"{sum(expected.values())} rows of {label}"
                )
            replaced = any(sure for i, sure in replacing if i > latest)
            before_visible = first_visible is not None and latest < first_visible
            if replaced or before_visible:
                assert not got, (
                    f"complete mode: readers see the rows of {label}, which a complete-mode "
                    "batch landed after (it replaces every row before it)"
                )
                continue
            after_visible = last_visible is not None and earliest > last_visible
            untouched = not any(i > earliest for i, _ in replacing)
            if certain and (untouched or after_visible):
                assert got == expected, (
                    f"complete mode: readers see {sum(got.values())} of the "
                    f"{sum(expected.values())} rows of {label}, which landed after the "
                    "last complete-mode batch to land"
                )
        for key in list(held):
            assert key in self.data, f"readers see rows never appended: {key}"
            assert held.pop(key) == self._expected(*key), f"readers see part of batch {key}"

    def _append_spans(self) -> dict[tuple[int, int], tuple[float, float, bool]]:
        """Each appended batch among the landings: the first and last place in them where it
        may have landed, and whether it surely landed."""
        spans: dict[tuple[int, int], tuple[float, float, bool]] = {}
        for i, (key, sure) in enumerate(self.landings):
            if self._replaces(key):
                continue
            if key[0] == FOREIGN_WRITER:
                # appended inside a commit (not sure): before or after the commit around it
                later = [
                    j for j, (k, _) in enumerate(self.landings) if j > i and k[0] != FOREIGN_WRITER
                ]
                spans[key] = (i, later[0] + 0.5 if not sure and later else i, True)
            elif key not in spans or not spans[key][2]:
                first = spans[key][0] if key in spans else i
                spans[key] = (i, i, True) if sure else (first, i, False)
        for key, (earliest, latest, certain) in spans.items():
            if not certain and self.status.get(key) == "committed":
                spans[key] = (earliest, latest, True)  # landed at one of its attempts
        return spans

    def _replacing_landings(self) -> list[tuple[tuple[int, int], bool]]:
        """The complete-mode batches among the landings."""
        return [(key, sure) for key, sure in self.landings if self._replaces(key)]

    def _last_landed(self) -> set[tuple[int, int]]:
        """The complete-mode batches that may have landed last: the last commit seen to land
        and every attempt in doubt after it (every attempt in doubt if none was seen to
        land)."""
        landings = self._replacing_landings()
        sure = [i for i, (_, landed) in enumerate(landings) if landed]
        start = sure[-1] if sure else 0
        return {key for key, _ in landings[start:]}

    def check_keyed_rows(self) -> None:
        """A keyed target holds, per key, the row of the latest visible batch that carried it
        (:func:`~eosink.testing.simulation_keyed.keyed_mismatch`)."""
        rows = self._rows(self.target.read())
        held = [(batch_of(row["id"]), self._comparable(row)) for row in rows]
        batches: dict[int, list[int]] = {}
        for writer, batch in sorted(self.data):
            batches.setdefault(writer, []).append(batch)
        wrong = keyed_mismatch(
            held,
            batches,
            lambda writer, batch: self.status.get((writer, batch)),
            lambda writer, batch: list(self._expected(writer, batch).elements()),
            self.spec.schema.names.index(self.kit.simulation_upsert_key),
        )
        assert wrong is None, f"keyed by {self.kit.simulation_upsert_key}: {wrong}"

    def _expected(self, writer: int, batch: int) -> Counter:
        rows: Counter = Counter()
        spec = self.spec.of_writer(writer)  # a row is read back as its writer wrote it
        for partition in self.data.get((writer, batch), []):
            for record_batch in partition:
                for row in record_batch.to_pylist():
                    rows[self._comparable(self.kit.simulation_row(spec, row))] += 1
        return rows

    def _comparable(self, row: dict[str, Any]) -> tuple:
        return tuple(comparable(row.get(name)) for name in self.spec.schema.names)

    def _held(self) -> dict[tuple[int, int], Counter]:
        held: dict[tuple[int, int], Counter] = {}
        for row in self._rows(self.target.read()):
            held.setdefault(batch_of(row["id"]), Counter())[self._comparable(row)] += 1
        return held

    def _rows(self, read: Any) -> list[dict[str, Any]]:
        """A reader's rows as dicts of the spec's types. A table is cast to the spec's schema;
        rows a reader gives as Python values get their float32 columns' values rounded to
        float32: a reader of text (plain SQL) gives a ``real`` as the shortest decimal that
        reads back as that float32 (``1e+20``), which Python parses as the double nearest it,
        not the float32 the batch wrote (``1.0000000200408773e+20``): the same value."""
        if isinstance(read, pa.Table):
            return read.select(self.spec.schema.names).cast(self.spec.schema).to_pylist()
        singles = [f.name for f in self.spec.schema if pa.types.is_float32(f.type)]
        if not singles:
            return list(read)
        return [{**row, **{n: as_float32(row.get(n)) for n in singles}} for row in read]


@st.composite
def predicates(draw: st.DrawFn, schema: pa.Schema, rows: list[dict[str, Any]]) -> Predicate:
    """A predicate on one of ``schema``'s columns: equal to a value ``rows`` hold, null, or
    between two of them (on the types that order: not booleans, lists, structs); NaN is
    never a bound (readers disagree on where it sorts)."""
    field = draw(st.sampled_from(list(schema)[1:]))
    values = _held_values(field, rows)
    if not values:
        return Predicate(field.name, "is_null")
    ops = ["eq", "is_null"] + ([] if pa.types.is_boolean(field.type) else ["between"])
    op = draw(st.sampled_from(ops))
    if op == "is_null":
        return Predicate(field.name, op)
    first = draw(st.sampled_from(values))
    if op == "eq":
        return Predicate(field.name, op, first)
    low, high = sorted([first, draw(st.sampled_from(values))])
    return Predicate(field.name, op, low, high)


def _held_values(field: pa.Field, rows: list[dict[str, Any]]) -> list[Any]:
    """The distinct values (not null, not NaN) rows hold in a column that compares (not a
    list or struct), in the order they come."""
    if pa.types.is_nested(field.type):
        return []
    values: list[Any] = []
    for row in rows:
        value = row.get(field.name)
        if value is not None and value == value and value not in values:
            values.append(value)
    return values


def sweep(schema: pa.Schema, rows: list[dict[str, Any]]) -> list[Predicate]:
    """:meth:`HistoryJudge.check_filtered_sweep`'s predicates: each data column's, and the
    row id equal to one row of each batch (up to 8): a reader that prunes by the id (a
    partition of it another program added, its files' bounds) must find every batch's rows."""
    firsts: dict[tuple[int, int], int] = {}
    for row in rows:
        firsts.setdefault(batch_of(row["id"]), row["id"])
    out = [Predicate("id", "eq", i) for i in list(firsts.values())[:8]]
    for field in list(schema)[1:]:
        out.append(Predicate(field.name, "is_null"))
        values = _held_values(field, rows)
        out += [Predicate(field.name, "eq", v) for v in values[:8]]
        if len(values) > 1 and not pa.types.is_boolean(field.type):
            out.append(Predicate(field.name, "between", min(values), max(values)))
    return out
