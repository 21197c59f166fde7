"""Schedules: the data model, generators and analysis (``from p4rotor import schedule as S``).

``model`` (the data, loading, validation, slices), ``generators``, ``analysis``, ``windows``
(time windows of circuits and slices), ``routes`` (per-slice routes), ``plot``.
"""

from .analysis import Analysis, analyse, moore_diameter_bound, summary, worst_diameter  # noqa: F401
from .generators import (GENERATORS, generate, generate_opera, generate_rotornet,  # noqa: F401
                         generate_selector, round_robin_matchings, selector_matchings)
from .model import *  # noqa: F401,F403
from .windows import SliceClock, dilate, direct_pairs, direct_windows  # noqa: F401
