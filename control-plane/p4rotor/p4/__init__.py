"""The P4 programs' contract, seen from Python: numeric constants and P4Info names."""

from .program import *  # noqa: F401,F403
