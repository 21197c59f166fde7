"""Faults as data: a plan of what breaks when (``plan``), and generators drawn from measured
distributions (seed 003)."""
