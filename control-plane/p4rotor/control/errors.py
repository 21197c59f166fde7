"""The controller's error type (and its one special case, another controller being primary)."""

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




class NotPrimaryError(ControllerError):
    """Another controller (a higher election id) is primary for a switch: this one refuses to run
    as a backup, or stops when it is taken over.  ``p4rotor control`` exits with status 3."""
