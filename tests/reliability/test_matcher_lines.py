"""Matches neither lost nor late (issue 38, finding 5): a line that straddles the 1 MiB piece the
follow and the search read is matched, and a wait that begins in the middle of a big file
numbers its lines from where an earlier wait counted them, not from byte 0.

Through the real daemon for the first; the second drives hive_bash.core.output.follow over a
real file and reads how many bytes it read only to count lines."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hive_bash.core.output import follow
from hive_bash.core.output.follow import StreamStart
from hivetest import Daemon, call_ok

pytestmark = pytest.mark.anyio

STRADDLING = "import sys, time; sys.stdout.write('x' * (2**20 - 2) + 'DONE\\n'); sys.stdout.flush(); time.sleep(120)"


async def test_a_line_straddling_a_piece_is_matched_by_wait_for_and_found_by_logs(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(
            client,
            "run",
            {"cmd": f'python3 -c "{STRADDLING}"', "name": "straddle", "wait_for": "DONE", "wait_seconds": 30},
        )
        assert reply.structured["verdict"] == "task started: id=straddle, running; matched 'DONE' at stdout line 1"
        assert reply.structured["matched_line"].endswith("xDONE")
        found = (await call_ok(client, "logs", {"id": "straddle", "pattern": "DONE"})).structured
        assert found["total_matches"] == 1, found
        await call_ok(client, "kill", {"id": "straddle", "force": True})


async def wait_for_done(out: Path, matchers: follow.Matchers) -> follow.Match:
    """A status(wait_for='DONE')-like wait from the file's end, while DONE is appended."""
    start = StreamStart("stdout", str(out), out.stat().st_size)
    async with follow.first_match("DONE", [start], matchers) as waited:
        with out.open("ab") as appending:
            appending.write(b"DONE\n")
        with anyio.fail_after(60):
            await waited.found.wait()
    assert waited.gave_up is None and waited.match is not None
    return waited.match


async def test_a_repeat_wait_after_a_big_prefix_counts_lines_on_from_the_last_one(tmp_path: Path) -> None:
    out = tmp_path / "big.out"
    lines = 2_000_000
    out.write_bytes(b"".join(b"line %07d\n" % number for number in range(lines)))  # 26 MB
    prefix = out.stat().st_size
    matchers = follow.Matchers(2, "wait_for")
    first = await wait_for_done(out, matchers)
    assert first.line == lines + 1
    assert matchers.counted_bytes == prefix  # the first wait counts the prefix once
    second = await wait_for_done(out, matchers)
    third = await wait_for_done(out, matchers)
    assert (second.line, third.line) == (lines + 2, lines + 3)
    assert matchers.counted_bytes - prefix <= 2 * len(b"DONE\n"), "a later wait counted the file from byte 0 again"
