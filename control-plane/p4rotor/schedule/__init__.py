"""Schedules: the data model, generators and analysis (``from p4rotor import schedule as S``)."""

from .model import *  # noqa: F401,F403
from .windows import SliceClock, dilate, direct_pairs, direct_windows  # noqa: F401
