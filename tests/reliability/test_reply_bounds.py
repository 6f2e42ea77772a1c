"""Reply budgets that held for common input and broke for large counts (issue 25).

`list(limit=5)` with 300 shell sessions was 35,775 characters as the model reads it (`sessions`
was never capped); a search with a 1,000-character pattern made a 10,201-character reply (the
pattern quoted whole, twice). Measured as Claude Code hands a reply to its model:
`JSON.stringify(structuredContent)`, over the real daemon and SDK client.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hivetest import Daemon, call_ok

pytestmark = pytest.mark.anyio

LIST_BUDGET = 4000
REPLY_BUDGET = 6000


def model_chars(structured: Any) -> int:
    return len(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))


async def test_list_with_300_sessions_stays_within_the_list_budget(make_daemon) -> None:
    daemon: Daemon = make_daemon()
    names = [f"session-{number:03d}-" + "n" * 40 for number in range(300)]
    async with daemon.client() as client:
        for name in names:
            await call_ok(client, "run", {"cmd": "true", "session": name, "wait_seconds": 10})
        reply = await call_ok(client, "list", {"limit": 5})
        listed = reply.structured
        assert model_chars(listed) <= LIST_BUDGET, model_chars(listed)
        shown = [row["name"] for row in listed["sessions"]]
        assert shown and shown == sorted(shown) and set(shown) <= set(names)
        assert listed["more_sessions"] == len(names) - len(shown), listed
        assert f"more_sessions: {len(names) - len(shown)}" in reply.text
        # one session by name is still there in full
        one = (await call_ok(client, "list", {"session": names[-1]})).structured
        assert [row["name"] for row in one["sessions"]] == [names[-1]] and "more_sessions" not in one


async def test_a_search_with_a_1000_character_pattern_stays_within_the_reply_budget(daemon: Daemon) -> None:
    pattern = "line|" + "|".join(f"absent{number:03d}" for number in range(90))
    pattern = pattern + "|" + "x" * (1000 - len(pattern) - 1)
    assert len(pattern) == 1000
    async with daemon.client() as client:
        ran = await call_ok(
            client,
            "run",
            {"cmd": "for i in $(seq 3000); do echo \"line $i $(printf '%0150d' 0)\"; done", "wait_seconds": 20},
        )
        task_id = ran.structured["id"]
        assert ran.structured["status"] == "done", ran.text
        found = await call_ok(client, "logs", {"id": task_id, "pattern": pattern})
    result = found.structured
    assert result["total_matches"] == 3000 and result["matches"], result["verdict"]
    assert model_chars(result) <= REPLY_BUDGET, model_chars(result)  # was 6,084 here (10,201 in the report)
    assert len(found.text) <= REPLY_BUDGET, len(found.text)
    assert pattern[:40] in result["verdict"] and "more: logs(" in result["verdict"], result["verdict"]
