"""vm-tests/scenarios.py keeps its own copy of what the daemon defines, because the NixOS test
driver runs it where hive_bash cannot be imported. These tests prove each copy equals the daemon's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hive_bash.model import Status

SCENARIOS_PY = Path(__file__).resolve().parents[2] / "vm-tests" / "scenarios.py"


def load_scenarios() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vm_scenarios", SCENARIOS_PY)
    assert spec is not None and spec.loader is not None, SCENARIOS_PY
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def test_terminal_statuses_are_the_daemons() -> None:
    """A scenario waiting for a task's end stops at every status the daemon ends a task with:
    missing one (as `failed` once was) turns a task the daemon ended into "not finished"."""
    daemon_terminal = {status.value for status in Status if status.is_terminal}
    assert set(load_scenarios().TERMINAL) == daemon_terminal
