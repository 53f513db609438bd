"""The benchmark of eosink-yt-static (not a test): ``writes``, the sink against a plain
``write_table``, the append commit against the table's size, and what spilling costs, on the
emulator. A program of its own and a module the benchmark report (``benchmarks/``) calls."""
