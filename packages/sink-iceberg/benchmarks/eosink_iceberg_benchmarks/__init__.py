"""The benchmarks of eosink-iceberg (not tests): ``commits`` (the per-batch exactly-once overhead
beside a bare pyiceberg append of the same files, and the cost as the table's history grows).
It is a program of its own and a module the benchmark report (``benchmarks/``) calls."""
