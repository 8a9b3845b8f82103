"""tilegraph._progress - PopTorch's compile progress line."""
from __future__ import annotations

import sys
import time


class _Progress:
    """Compile progress on stderr, as PopTorch shows it: a bar over the stages
    (export, import, compile) redrawn in place on a terminal, one line per
    stage otherwise, and the time it took."""

    STAGES = 3

    def __init__(self, title, show=True):
        self.title, self.t0 = title, time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.show = show  # Options.showCompilationProgressBar

    def _bar(self, k, what):
        filled = 20 * k // (self.STAGES + 1)
        return (f"{self.title} [{'#' * filled}{'.' * (20 - filled)}] "
                f"{100 * k // (self.STAGES + 1):3d}% {what} ({time.perf_counter() - self.t0:.1f} s)")

    def stage(self, k, what):
        if not self.show:
            return
        line = self._bar(k, what)
        print(("\r\033[K" + line) if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)

    def run(self, fn, *args):
        """fn(*args); on failure the bar's line is ended first, so the error starts its own."""
        try:
            return fn(*args)
        except BaseException:
            if self.tty and self.show:
                print(file=sys.stderr, flush=True)
            raise

    def done(self):
        if not self.show:
            return
        line = f"{self.title} [{'#' * 20}] 100% done in {time.perf_counter() - self.t0:.1f} s"
        print(("\r\033[K" + line) if self.tty else line, file=sys.stderr, flush=True)
