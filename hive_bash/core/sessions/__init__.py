"""Shell sessions: a working directory and exported variables carried between runs (session).
Other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.sessions.session import WRAPPER_ENV, SessionState, SessionStore

__all__ = [
    "SessionState",
    "SessionStore",
    "WRAPPER_ENV",
]
