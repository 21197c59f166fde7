"""The controller's one error type."""

from __future__ import annotations

from typing import Sequence


class ControllerError(Exception):
    """Any controller failure, with one line per failed update where there were some."""

    def __init__(self, message: str, failures: Sequence[str] = ()):
        self.failures = list(failures)
        text = message
        if self.failures:
            text += ": " + "; ".join(self.failures)
        super().__init__(text)


