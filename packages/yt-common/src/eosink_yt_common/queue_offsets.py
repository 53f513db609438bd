"""The part of eosink-yt-queue's checkpoint offsets that a YT sink reads: the batch's consumer.

eosink-yt-queue writes, for every batch, its end offset into Spark's offset log::

    {"v": 1, "queues": {"//home/app/events": {"0": 120, "1": 97}},
     "ids": {"//home/app/events": "1a2b-..."},
     "consumer": "//home/app/consumer", "proxy": "cluster-proxy"}

``queues`` holds, per queue and tablet, the row index of the next row to read; ``consumer`` and
``proxy`` (only when the source advances a consumer; checkpoints written before they existed
lack them) name the YT consumer and the cluster the rows came from. A sink that writes into
the same cluster may move that consumer in the transaction that makes the batch's rows
visible (eosink-yt-dynamic's transactional mode), so the consumer never trails nor passes the
rows it stands for. The sink does not depend on the source, nor the source on the sink: the
shape both speak is here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

#: The version of the offset JSON (eosink-yt-queue refuses others).
VERSION = 1

#: A tablet of a queue: (queue path, tablet index).
Tablet = tuple[str, int]


@attrs.frozen
class ConsumerPosition:
    """Where a batch leaves a consumer: per tablet of its queues, the next row to read."""

    consumer: str
    #: The proxy the source read the queues through (its option ``proxy``).
    proxy: str
    offsets: dict[Tablet, int]


def consumer_fields(consumer: str | None, proxy: str) -> dict[str, str]:
    """The keys the source adds to its offset JSON for a consumer (none without one)."""
    return {"consumer": consumer, "proxy": proxy} if consumer else {}


def consumer_position(offset: Any) -> ConsumerPosition | None:
    """The consumer of a source's offset JSON and the batch's end in it; ``None`` for offsets
    of other sources, of other versions, and of queue offsets that name no consumer."""
    if not isinstance(offset, Mapping) or offset.get("v") != VERSION:
        return None
    consumer, proxy, queues = offset.get("consumer"), offset.get("proxy"), offset.get("queues")
    if not isinstance(consumer, str) or not isinstance(proxy, str):
        return None
    if not isinstance(queues, Mapping):
        return None
    try:
        offsets = {
            (str(q), int(t)): int(r) for q, tablets in queues.items() for t, r in tablets.items()
        }
    except (AttributeError, TypeError, ValueError):
        return None
    return ConsumerPosition(consumer=consumer, proxy=proxy, offsets=offsets)


def same_cluster(proxy: str, other: str) -> bool:
    """Whether two ``proxy`` options name the same cluster, as far as their text tells: equal
    up to case, the URL scheme and a trailing slash. Two spellings of one cluster that differ
    otherwise (a short name and the full host) count as two: the caller then leaves the
    consumer to the source."""
    return _normal(proxy) == _normal(other)


def _normal(proxy: str) -> str:
    text = proxy.strip().lower()
    for scheme in ("http://", "https://"):
        text = text.removeprefix(scheme)
    return text.rstrip("/")
