"""A run/status reply read back by programs: what its verdict states, as keys.

Apart from the builders so the `hive-bash` CLI can read replies without importing the server side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hive_bash.model import Status

_STARTED = re.compile(r"task started: id=[a-z0-9-]+, (?P<status>[a-z_]+)")
_ENDING = re.compile(r"(?P<status>[a-z_]+)(?:, exit (?P<exit>-?\d+)|, (?P<signal>SIG[A-Z0-9+-]+))?")


def with_state(reply: Mapping[str, Any]) -> dict[str, Any]:
    """A run/status reply with what its verdict states as keys: status, exit_code, signal.

    For programs that read keys, not sentences (`hive-bash --json`, its exit status, the tests);
    the model reads the verdict. Any other reply is returned as it is."""
    found = dict(reply)
    if "stdout_path" not in reply:
        return found
    verdict_text = str(reply.get("verdict", ""))
    started = _STARTED.match(verdict_text)
    ending = None if started else _ENDING.match(verdict_text)
    if started:
        found["status"] = started["status"]
    elif ending and ending["status"] in Status._value2member_map_:
        found["status"] = ending["status"]
        if ending["exit"] is not None:
            found["exit_code"] = int(ending["exit"])
        if ending["signal"] is not None:
            found["signal"] = ending["signal"]
    return found
