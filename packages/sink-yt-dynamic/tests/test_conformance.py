"""The core's conformance kit, against the emulated YT proxy.

The rows carry source coordinates: ``tablet_index`` = the partition, ``row_index`` = a position
unique within the batch's tablet, as rows read from a queue would. An idempotent receiver keeps
rows with the same key once by construction, so the kit's "no duplicate" check alone proves
little; two things keep it meaningful: ``read_rows`` compares the whole row (``id`` included),
so a replay that landed under other keys shows up as duplicate ids; and
``test_kit_catches_a_non_idempotent_key`` runs the crash scenarios on a variant whose key is not
a function of the source row (it includes the attempt) and expects the kit to fail it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import OUT, make_sink_for, rows_schema, table_rows

from eosink.plugin import hookimpl
from eosink.testing.conformance import SinkConformance
from eosink_yt_dynamic import YtDynamicSink, create_output_table
from eosink_yt_dynamic.sink import WriteState


class YtConformance(SinkConformance):
    same_rows_share_keys = True  # rows are keyed by their source coordinates

    def source_batch(self, batch_id: int, partition: int, rows: int) -> pa.RecordBatch:
        base = super().source_batch(batch_id, partition, rows)
        ids = base.column("id").to_pylist()
        return (
            pa.record_batch(
                {
                    "tablet_index": pa.array([partition] * rows, pa.int64()),
                    "row_index": pa.array([batch_id * 1_000 + i for i in range(rows)], pa.int64()),
                    "id": base.column("id"),
                    "name": base.column("name"),
                    "amount": base.column("amount"),
                }
            )
            if ids or rows == 0
            else base
        )


class TestYtDynamicConformance(YtConformance):
    @pytest.fixture
    def make_sink(self, yt_emulator, yt):
        create_output_table(yt, OUT, rows_schema())
        return lambda: make_sink_for(yt_emulator)

    @pytest.fixture
    def read_rows(self, yt):
        return lambda: table_rows(yt)


class AttemptInKey(YtDynamicSink):
    """Broken on purpose: the key includes the init attempt, so it is not a function of the row."""

    @hookimpl
    def init(self, ctx, schema):
        state = super().init(ctx, schema.append(pa.field("attempt", pa.string())))
        return state

    def _write_chunk(self, client, ctx, state: WriteState, partition_id, n, chunk):
        chunk = chunk.append_column("attempt", pa.array([state.attempt] * chunk.num_rows))
        return super()._write_chunk(client, ctx, state, partition_id, n, chunk)


@pytest.mark.parametrize(
    "scenario", ["test_crash_mid_write", "test_crash_after_write_before_commit"]
)
def test_kit_catches_a_non_idempotent_key(scenario, yt_emulator, yt):
    schema = rows_schema().append(pa.field("attempt", pa.string()))
    create_output_table(yt, OUT, schema, extra_key=["attempt"])
    kit = YtConformance()
    method = getattr(kit, scenario)
    kwargs = {
        "make_sink": lambda: AttemptInKey(make_sink_for(yt_emulator).options),
        "read_rows": lambda: [
            {k: v for k, v in row.items() if k != "attempt"} for row in table_rows(yt)
        ],
    }
    with pytest.raises(AssertionError, match="duplicate"):
        method(**{k: v for k, v in kwargs.items() if k in method.__code__.co_varnames})
