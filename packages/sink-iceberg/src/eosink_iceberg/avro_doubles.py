"""Exact doubles in the manifests pyiceberg reads, and so in those it writes from them.

pyiceberg's Cython Avro decoder, its default, returns an Avro ``double`` through a C ``float``
in 0.12 (apache/iceberg-python#3808, fixed after that release): a double partition value read
from a manifest is rounded to 32 bits (0.1 reads as 0.10000000149011612, 1e300 as ``inf``,
-2.26e-276 as -0.0). What pyiceberg writes from what it read, the entries of merged manifests
and those an overwrite keeps of a manifest it rewrites, then holds those values, and every
reader prunes the files by them: a filtered read skips their rows, for good. (The partition
summaries and column bounds are bytes, not Avro doubles: they stay right.)

Where the installed decoder is that one, :func:`use_exact_doubles` makes pyiceberg read Avro
with its pure-Python decoder (the one it falls back to without the compiled module), for this
process: slower on large manifests, never wrong. A pyiceberg whose compiled decoder reads a
double right is left as it is.
"""

from __future__ import annotations

import functools
import struct

from eosink.logs import get_logger

log = get_logger("eosink.iceberg")

#: A double a 32-bit float does not hold.
_PROBE = 0.1


@functools.cache
def use_exact_doubles() -> bool:
    """Switch pyiceberg to its pure-Python Avro decoder if its compiled one rounds doubles;
    True if it did (once per process)."""
    try:
        from pyiceberg.avro.decoder_fast import CythonBinaryDecoder
    except ImportError:
        return False  # pyiceberg reads with the pure-Python decoder already
    if CythonBinaryDecoder(struct.pack("<d", _PROBE)).read_double() == _PROBE:
        return False
    import pyiceberg.avro.file as avro_file
    from pyiceberg.avro.decoder import StreamingBinaryDecoder

    avro_file.new_decoder = StreamingBinaryDecoder
    log.info("iceberg.avro_doubles", decoder="pure-python", why="compiled decoder rounds doubles")
    return True
