"""The benchmark of eosink-yt-queue (not a test): ``reads``, the source's read rate on the
emulator. A program of its own."""
