"""Keyed todos on the agent harness's socket: the state machine of a task's todo (state), the
harness protocol (harness) and the texts the agent reads (texts).

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
"""

from __future__ import annotations

from hive_bash.core.todos.state import NOTICE_EVERY_SECS, TodoStateMachine

__all__ = [
    "NOTICE_EVERY_SECS",
    "TodoStateMachine",
]
