"""Keyed sinks in the core: which output modes a query may run with into them
(``foreach_batch``), and the kit's oracle of a keyed target
(:func:`eosink.testing.simulation_keyed.keyed_mismatch`)."""

from __future__ import annotations

from collections import Counter

import pytest

from eosink.errors import ConfigurationError
from eosink.plugin import hookimpl
from eosink.registry import upsert_key
from eosink.spark.foreach_batch import check_output_mode, foreach_batch
from eosink.testing.simulation_keyed import keyed_mismatch


class Plain:
    name = "plain"


class Keyed:
    name = "keyed"

    @hookimpl
    def upsert_key(self):
        return ("user_id",)


def test_a_sink_says_its_key_through_the_hook():
    assert upsert_key(Keyed()) == ("user_id",)
    assert upsert_key(Plain()) is None


def test_update_mode_needs_every_sink_keyed():
    keyed = foreach_batch(Keyed(), writer_id="w")
    check_output_mode("update", keyed.mode, keyed.keyed)  # accepted
    check_output_mode("append", keyed.mode, keyed.keyed)  # a change feed, upserted
    for sinks in [(Plain(),), (Keyed(), Plain())]:
        writer = foreach_batch(*sinks, writer_id="w")
        with pytest.raises(ConfigurationError, match="without a key.*mode='upsert', key="):
            check_output_mode("update", writer.mode, writer.keyed)


def test_keyed_and_plain_sinks_share_an_append_query():
    writer = foreach_batch(Keyed(), Plain(), writer_id="w")
    check_output_mode("append", writer.mode, writer.keyed)


def test_complete_mode_into_a_keyed_sink_is_refused():
    """A complete batch is the whole result; an upsert would keep the keys that vanished."""
    with pytest.raises(ConfigurationError, match="upserts by key.*mode='complete'"):
        foreach_batch(Keyed(), writer_id="w", mode="complete")


# -- the kit's oracle -------------------------------------------------------------------------
#: rows are (id, key, value); writer 0 wrote batch 0: keys 1, 2; batch 1: keys 2, 3
WRITTEN = {
    (0, 0): [(1, 1, "a"), (2, 2, "b")],
    (0, 1): [(3, 2, "c"), (4, 3, "d")],
}


def mismatch(held, status):
    return keyed_mismatch(
        [((0, batch), row) for batch, row in held],
        {0: [0, 1]},
        lambda w, b: status.get(b),
        lambda w, b: list(Counter(WRITTEN[(w, b)]).elements()),
        key_index=1,
    )


def test_the_latest_batch_of_each_key_is_expected():
    both = {0: "committed", 1: "committed"}
    assert mismatch([(0, (1, 1, "a")), (1, (3, 2, "c")), (1, (4, 3, "d"))], both) is None


def test_an_older_row_in_place_of_a_newer_one_is_found():
    both = {0: "committed", 1: "committed"}
    stale = [(0, (1, 1, "a")), (0, (2, 2, "b")), (1, (4, 3, "d"))]
    assert "missing or stale" in mismatch(stale, both)


def test_a_key_held_twice_is_found():
    both = {0: "committed", 1: "committed"}
    twice = [(0, (1, 1, "a")), (0, (2, 2, "b")), (1, (3, 2, "c")), (1, (4, 3, "d"))]
    assert "held twice" in mismatch(twice, both)


def test_a_batch_in_doubt_is_visible_wholly_or_not_at_all():
    doubt = {0: "committed", 1: "maybe"}
    assert mismatch([(0, (1, 1, "a")), (0, (2, 2, "b"))], doubt) is None
    assert mismatch([(0, (1, 1, "a")), (1, (3, 2, "c")), (1, (4, 3, "d"))], doubt) is None
    half = [(0, (1, 1, "a")), (1, (3, 2, "c"))]  # key 3 of batch 1 missing
    assert "no set of its visible batches" in mismatch(half, doubt)


def test_a_committed_batch_may_not_vanish():
    assert "missing" in mismatch([], {0: "committed", 1: "committed"})
