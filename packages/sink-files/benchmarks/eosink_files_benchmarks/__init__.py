"""The benchmarks of eosink-files (not tests): ``throughput`` (the stream beside Spark's parquet
sink and ``noop``) and ``log_cost`` (the per-batch cost as the log grows). Each is a program of
its own and a module the benchmark report (``benchmarks/``) calls."""
