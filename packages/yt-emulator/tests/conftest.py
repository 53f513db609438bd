import os
import sys

try:
    import eosink_yt_emulator  # noqa: F401
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(
        0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    )

from eosink_yt_emulator.pytest_plugin import (  # noqa: E402
    yt_client,
    yt_emulator,
    yt_emulator_process,
)

# The fixtures are used by name; listing them here keeps linters from dropping the import.
__all__ = ["yt_client", "yt_emulator", "yt_emulator_process"]
