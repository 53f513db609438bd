"""The proof of a batch: an attribute of the target table, set in the batch's own transaction.

This is the ``yt-static`` sink's exactly-once evidence, in one place:

* **what**: the core's :class:`eosink.plugin.Proof` of each writer's latest batch, as JSON;
* **where**: the table's attribute ``@eosink_proofs`` = ``{writer id: proof JSON}``
  (:data:`PROOFS_ATTR`), set inside MainTx by the Commit SubTx
  (:func:`eosink_yt_static.publish.run` calls :func:`write_proof`): rows and proof
  become visible in the same commit of MainTx;
* **how it is read**: outside any transaction it tells what is committed (``is_committed``,
  the Commit SubTx's check); read inside MainTx (:func:`prepared_proof`), what an attempt of
  the batch already prepared.
"""

from __future__ import annotations

from typing import Any

from eosink.plugin import Proof
from eosink_yt_static import tx as txs

#: The table attribute holding the proofs: ``{writer_id: proof json}``.
PROOFS_ATTR = "eosink_proofs"


def read_proof(raw: Any, writer_id: str) -> Proof | None:
    """The proof of ``writer_id`` in the attribute's value ``raw`` (None when it has none)."""
    if not raw or writer_id not in raw:
        return None
    return Proof.from_json(str(raw[writer_id]))


def proof_in(attributes: dict[str, Any] | None, writer_id: str) -> Proof | None:
    """The proof of ``writer_id`` among a table's attributes (None: no table, no proof)."""
    return read_proof((attributes or {}).get(PROOFS_ATTR), writer_id)


def prepared_proof(client: Any, path: str, main_tx: str, writer_id: str) -> Proof | None:
    """The proof of ``writer_id`` as MainTx sees it (set by an attempt that did not commit)."""
    from yt.wrapper.errors import YtResponseError

    try:
        with txs.in_tx(client, main_tx):
            raw = client.get(f"{path}/@{PROOFS_ATTR}")
    except YtResponseError as exc:
        if exc.is_resolve_error():
            return None
        raise
    return read_proof(raw, writer_id)


def write_proof(
    client: Any, path: str, proofs: dict[str, Any], writer_id: str, proof: Proof
) -> None:
    """Set ``writer_id``'s proof among ``proofs`` (the table's, as the caller's transaction
    sees them) on the table, in the caller's transaction."""
    proofs[writer_id] = proof.to_json()
    client.set(f"{path}/@{PROOFS_ATTR}", proofs)
