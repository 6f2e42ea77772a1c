"""The numbers the tools promise, typed once: checked by hive_bash.mcp.arguments and written by `secs` and
`mib` into what the model and the CLI's user read (descriptions, replies, help texts)."""

from __future__ import annotations

WAIT_CAP_SECS = 30.0  # one inline wait (run, status, logs); longer CLI waits are made of several calls
DEFAULT_RUN_WAIT_SECS = 3.0
LOGS_DEFAULT_BYTES = 4096  # a default logs page stays within one reply's budget (6,000 characters)
LOGS_MAX_BYTES = 1024 * 1024
LIST_DEFAULT = 50
LIST_MAX = 500
WRITE_MAX_BYTES = 1024 * 1024
# What `kill` and `write` suggest to wait for their effect: a short wait, not the cap.
FOLLOW_UP_WAIT_SECS = 5.0


def secs(value: float) -> str:
    """`30`, `0.5`: a number of seconds as the texts write it."""
    return f"{value:g}"


def mib(value: int) -> str:
    """`1 MiB` for a limit that is a whole number of MiB."""
    return f"{value // (1024 * 1024)} MiB"


# The two waits as every text writes them (descriptions, `next` steps, help texts).
WAIT_CAP = secs(WAIT_CAP_SECS)
FOLLOW_UP = secs(FOLLOW_UP_WAIT_SECS)
