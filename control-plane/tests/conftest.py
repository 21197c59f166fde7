"""Fixtures every test of the package gets."""

from __future__ import annotations

import pytest

from p4rotor.fabric import agents


@pytest.fixture(autouse=True)
def _agents_live_files_in_tmp(tmp_path_factory, monkeypatch):
    """Agents started by a test (most with a stand-in emulation that never stops them) keep their
    live files under the test's temporary directory, not in /dev/shm (fabric/agents.py: LIVE_ROOT)."""
    root = tmp_path_factory.mktemp("shm")
    monkeypatch.setattr(agents, "LIVE_ROOT", root)
