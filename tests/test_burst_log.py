"""hive_bash.burst_log: a warning a flood repeats is said once per burst, then counted."""

from __future__ import annotations

import pytest

from hive_bash import burst_log
from hive_bash.burst_log import BurstLog


def test_a_burst_is_logged_once_then_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    burst = BurstLog()
    assert burst.starts_burst() == (True, 0)
    for _ in range(3):
        assert burst.starts_burst() == (False, 0)
    assert burst.starts_burst(count=10) == (False, 0)  # ten at once (a look found ten strays)
    # No quiet spell needed to end a burst: the next error starts one, and says how many were left out.
    monkeypatch.setattr(burst_log, "QUIET_SECS_ENDING_A_BURST", -1.0)
    assert burst.starts_burst() == (True, 13)
    assert burst.starts_burst() == (True, 0)
