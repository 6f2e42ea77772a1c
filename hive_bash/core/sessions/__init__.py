"""Shell sessions: a working directory and exported variables carried between runs (session).
Other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.sessions.session import (
    WRAPPER_ENV as WRAPPER_ENV,
    SessionState as SessionState,
    SessionStore as SessionStore,
)
