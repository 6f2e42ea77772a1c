"""Shell sessions: a working directory and exported variables carried from one `run` to the
next (session).

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
"""

from __future__ import annotations

from hive_bash.core.sessions.session import WRAPPER_ENV, SessionState, SessionStore

__all__ = [
    "SessionState",
    "SessionStore",
    "WRAPPER_ENV",
]
