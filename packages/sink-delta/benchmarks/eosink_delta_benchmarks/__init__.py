"""The benchmarks of eosink-delta (not tests): ``throughput`` (beside Spark's parquet sink and
eosink-files), ``history`` (the per-batch driver cost as the table's history grows), ``store``
(the per-batch exactly-once overhead, local disk vs S3). Each is a program of its own and a
module the benchmark report (``benchmarks/``) calls."""
