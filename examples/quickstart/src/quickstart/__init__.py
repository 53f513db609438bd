"""eosink's quickstart: a streaming job into a local folder, killed and restarted, exactly once."""
