"""The benchmark of eosink-yt-dynamic (not a test): ``writes``, rows/s of the sink vs a bare
``insert_rows`` loop on the emulator. A program of its own and a module the benchmark report
(``benchmarks/``) calls."""
