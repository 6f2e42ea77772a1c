"""Keyed todos on the agent harness's socket: a task's todo state (state), the harness protocol
(harness), the texts (texts). Other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.todos.state import NOTICE_EVERY_SECS as NOTICE_EVERY_SECS, TodoStateMachine as TodoStateMachine
