"""Progress lines on stderr while the report runs (elapsed time, section, step)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, sections: int) -> None:
        self.began = time.monotonic()
        self.sections = sections
        self.section = 0
        self.title = ""

    def start(self, title: str) -> None:
        self.section += 1
        self.title = title
        self.step("start")

    def step(self, message: str) -> None:
        elapsed = int(time.monotonic() - self.began)
        print(
            f"[{elapsed // 60:3d}:{elapsed % 60:02d}] {self.section}/{self.sections} "
            f"{self.title}: {message}",
            file=sys.stderr,
            flush=True,
        )
