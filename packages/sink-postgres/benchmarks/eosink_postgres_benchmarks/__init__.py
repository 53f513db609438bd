"""The benchmarks of eosink-postgres (not tests): ``throughput`` (both front doors beside Spark's
JDBC writer, a bare COPY loop and an Arrow-only floor) and ``history`` (the per-batch driver
cost as the proofs table grows). Each is a program of its own and a module the benchmark report
(``benchmarks/``) calls."""
