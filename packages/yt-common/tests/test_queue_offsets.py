"""The consumer a YT queue source's offsets name, as a YT sink reads them."""

from __future__ import annotations

from eosink_yt_common.queue_offsets import consumer_fields, consumer_position, same_cluster


def test_the_consumer_and_the_batchs_end_are_read_from_the_offsets():
    offset = {
        "v": 1,
        "queues": {"//q/a": {"0": 5, "1": 3}, "//q/b": {"0": 7}},
        "ids": {"//q/a": "1-2"},
        **consumer_fields("//q/consumer", "cluster:80"),
    }
    position = consumer_position(offset)
    assert position is not None
    assert (position.consumer, position.proxy) == ("//q/consumer", "cluster:80")
    assert position.offsets == {("//q/a", 0): 5, ("//q/a", 1): 3, ("//q/b", 0): 7}


def test_offsets_without_a_consumer_or_of_other_sources_name_none():
    assert consumer_fields(None, "cluster:80") == {}
    assert consumer_position({"v": 1, "queues": {"//q/a": {"0": 5}}}) is None
    assert consumer_position({"v": 2, "queues": {}, "consumer": "//c", "proxy": "p"}) is None
    assert consumer_position({"logOffset": 5}) is None
    assert consumer_position(None) is None
    assert consumer_position([1, 2]) is None
    assert (
        consumer_position({"v": 1, "queues": {"//q": 3}, "consumer": "//c", "proxy": "p"}) is None
    )


def test_proxies_of_one_cluster_are_told_by_their_text():
    assert same_cluster("http://localhost:8000/", "LOCALHOST:8000")
    assert same_cluster("https://cluster.example", "cluster.example")
    assert not same_cluster("cluster.example", "other.example")
    assert not same_cluster("localhost:8000", "localhost:8001")
