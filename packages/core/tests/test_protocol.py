"""The driver-side protocol: skip rule, abort on failure, identity checks, fan-out."""

import itertools

import pyarrow as pa
import pytest
from sample_sinks import STORES, DataFrameStagingSink, MemorySink

from eosink import CheckpointMismatchError, MissingWriterIdError
from eosink.plugin import BatchContext, SinkError, Staged, hookimpl
from eosink.testing import run_batch
from eosink.testing import LocalRunner
from eosink.testing.conformance import SinkConformance

names = (f"store-{n}" for n in itertools.count())


def rows(*ids):
    return [[pa.record_batch({"id": pa.array(list(ids), pa.int64())})]]


SCHEMA = pa.schema([("id", pa.int64())])


class TestMemorySinkConformance(SinkConformance):
    """The kit runs in the core itself against the in-memory sink."""

    @pytest.fixture
    def make_sink(self):
        name = next(names)
        return lambda: MemorySink(name=name)

    @pytest.fixture
    def read_rows(self, make_sink):
        return lambda: STORES[make_sink().options.name]["rows"]


def test_failed_commit_aborts_and_reraises():
    sink = MemorySink(name=next(names), fail_commit=True)
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    with pytest.raises(RuntimeError, match="commit failed"):
        run_batch(sink, ctx, SCHEMA, LocalRunner(rows(1, 2)))
    assert STORES[sink.options.name]["staged"] == {} and STORES[sink.options.name]["rows"] == []


def test_failed_init_aborts_with_no_state_and_reraises():
    """hookspecs.abort: it runs after any failure of init too, with ``state`` None, so a sink
    whose init opened something in the target (a transaction, a lock) and then failed can
    release it before the error reaches Spark."""
    aborted = []

    class InitFails:
        @hookimpl(tryfirst=True)
        def init(self):
            raise OSError("init failed half-way")

        @hookimpl(tryfirst=True)
        def abort(self, state, messages):
            aborted.append((state, messages))

    sink = MemorySink(name=next(names))
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    with pytest.raises(OSError, match="init failed half-way"):
        run_batch(sink, ctx, SCHEMA, LocalRunner(rows(1)), plugins=[InitFails()])
    assert aborted == [(None, [])]
    assert STORES[sink.options.name]["rows"] == []


def test_abort_failure_never_hides_the_original_error():
    class BadAbort:
        @hookimpl(tryfirst=True)
        def abort(self):
            raise OSError("cleanup failed")

    sink = MemorySink(name=next(names), fail_commit=True)
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    with pytest.raises(RuntimeError, match="commit failed"):
        run_batch(sink, ctx, SCHEMA, LocalRunner(rows(1)), plugins=[BadAbort()])


def test_missing_writer_id_is_an_error_that_says_what_to_do():
    ctx = BatchContext(sink="memory", writer_id="", batch_id=0)
    with pytest.raises(MissingWriterIdError, match="choose a stable one"):
        run_batch(MemorySink(name=next(names)), ctx, SCHEMA, LocalRunner(rows(1)))


def test_new_checkpoint_explains_how_to_proceed():
    sink = MemorySink(name=next(names))
    first = BatchContext(sink="memory", writer_id="w", batch_id=3, query_id="q1", checkpoint="/c1")
    run_batch(sink, first, SCHEMA, LocalRunner(rows(1)))
    restarted = BatchContext(
        sink="memory", writer_id="w", batch_id=0, query_id="q2", checkpoint="/c2"
    )
    with pytest.raises(CheckpointMismatchError) as error:
        run_batch(sink, restarted, SCHEMA, LocalRunner(rows(1)))
    text = str(error.value)
    assert (
        "/c1" in text
        and "/c2" in text
        and "original checkpoint" in text
        and "new writer id" in text
    )
    # past the old output, a new checkpoint just writes on
    later = BatchContext(sink="memory", writer_id="w", batch_id=4, query_id="q2", checkpoint="/c2")
    assert run_batch(sink, later, SCHEMA, LocalRunner(rows(2))).status == "committed"


def test_fan_out_each_sink_exactly_once_on_its_own():
    """The second sink fails; on replay the first skips and the second writes."""
    first, second = MemorySink(name=next(names)), MemorySink(name=next(names), fail_commit=True)
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    assert run_batch(first, ctx, SCHEMA, LocalRunner(rows(1, 2))).status == "committed"
    with pytest.raises(RuntimeError):
        run_batch(second, ctx, SCHEMA, LocalRunner(rows(1, 2)))
    repaired = MemorySink(name=second.options.name)
    outcomes = [run_batch(s, ctx, SCHEMA, LocalRunner(rows(1, 2))) for s in (first, repaired)]
    assert [o.status for o in outcomes] == ["skipped", "committed"]
    assert (
        STORES[first.options.name]["rows"]
        == STORES[second.options.name]["rows"]
        == [
            {"id": 1},
            {"id": 2},
        ]
    )


class NoWrites(LocalRunner):
    """A runner that must not run: the sink staged the DataFrame itself."""

    def __call__(self, task):
        raise AssertionError("write ran although write_dataframe staged the batch")


def test_write_dataframe_stages_the_batch_instead_of_write():
    sink = DataFrameStagingSink(name=next(names))
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    df = [{"id": 1}, {"id": 2}, {"id": 3}]
    outcome = run_batch(sink, ctx, SCHEMA, NoWrites([]), df=df)
    assert (outcome.status, outcome.rows) == ("committed", 3)
    store = STORES[sink.options.name]
    assert store["rows"] == df
    assert store["proofs"][("w", 0)].rows == 3
    assert run_batch(sink, ctx, SCHEMA, NoWrites([]), df=df).status == "skipped"


@pytest.mark.parametrize("case", ["sink declines", "fingerprint asked", "no dataframe"])
def test_write_runs_when_the_dataframe_path_does_not_apply(case):
    sink = DataFrameStagingSink(name=next(names), offer=case != "sink declines")
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    kwargs = {"df": None if case == "no dataframe" else [{"id": 99}]}
    if case == "fingerprint asked":
        kwargs["fingerprint"] = "error"
    outcome = run_batch(sink, ctx, SCHEMA, LocalRunner(rows(1, 2)), **kwargs)
    assert (outcome.status, outcome.rows) == ("committed", 2)
    assert STORES[sink.options.name]["rows"] == [{"id": 1}, {"id": 2}]


def test_failed_dataframe_staging_aborts_and_commits_nothing():
    sink = DataFrameStagingSink(name=next(names), fail_staging=True)
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    with pytest.raises(RuntimeError, match="staging failed"):
        run_batch(sink, ctx, SCHEMA, NoWrites([]), df=[{"id": 1}])
    store = STORES[sink.options.name]
    assert store["rows"] == [] and store["proofs"] == {}


def test_executor_plugins_keep_the_dataframe_path():
    """Fault injection must reach the path production takes, not switch it off."""
    sink = DataFrameStagingSink(name=next(names))
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    outcome = run_batch(
        sink, ctx, SCHEMA, NoWrites([]), df=[{"id": 1}], executor_plugins=[object()]
    )
    assert (outcome.status, outcome.rows) == ("committed", 1)


class MiscountingSink(DataFrameStagingSink):
    """Reports one row more than it staged."""

    @hookimpl
    def write_dataframe(self, state, df):
        staged = super().write_dataframe(state, df)
        return Staged(staged.message, rows=len(df) + 1)


class UnobservedSink(DataFrameStagingSink):
    """Stages on its own, past the core's helper: the core never sees the rows."""

    @hookimpl
    def write_dataframe(self, state, df):
        key = (state, "dataframe", 0)
        STORES[self.options.name]["staged"][key] = list(df)
        return Staged(key, rows=len(df))


@pytest.mark.parametrize(
    ("sink_class", "error"),
    [(MiscountingSink, "reports 3 rows but Spark wrote 2"), (UnobservedSink, "staged nothing")],
)
def test_proof_rows_come_from_the_core_not_the_sink(sink_class, error):
    sink = sink_class(name=next(names))
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    with pytest.raises(SinkError, match=error):
        run_batch(sink, ctx, SCHEMA, NoWrites([]), df=[{"id": 1}, {"id": 2}])
    assert STORES[sink.options.name]["proofs"] == {}


class PluginsSeenSink(DataFrameStagingSink):
    """Records the executor plugins a staging write would wrap its tasks with."""

    seen: list = []

    @hookimpl
    def write_dataframe(self, state, df):
        from eosink.staging import current

        PluginsSeenSink.seen.append(current().plugins)
        return super().write_dataframe(state, df)


def test_phase_logging_alone_leaves_spark_s_staging_write_unwrapped():
    """The phase logger rides with every write task (it carries the log settings), but a
    Spark-staged batch gets a Python pass-through around its tasks only for the caller's own
    executor plugins: logging alone must not route every row through Python."""
    sink = PluginsSeenSink(name=next(names))
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    run_batch(sink, ctx, SCHEMA, NoWrites([]), df=[{"id": 1}])
    plugin = object()
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=1)
    run_batch(sink, ctx, SCHEMA, NoWrites([]), df=[{"id": 2}], executor_plugins=[plugin])
    assert PluginsSeenSink.seen == [(), (plugin,)]
