"""One benchmark report over every sink: ``./pants run benchmarks:report -- --size smoke``."""
