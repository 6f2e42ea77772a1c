"""Words for people and models: durations, sizes, a command shortened, how a task ended; the replies, the
todo texts and the engine's end reasons and log lines say these things the same way."""

from __future__ import annotations

import re

from hive_bash.model import Status

CMD_PREVIEW_CHARS = 120


def seconds(value: float) -> str:
    if value < 10:
        return f"{value:.3g}s" if value < 1 else f"{value:.1f}s"
    if value < 120:
        return f"{value:.0f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 120:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def size(value: int) -> str:
    """Bytes as a short human size: 512 B, 3.2 KiB, 41 MiB, 1.5 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.2g} {unit}" if value < 10 * scale else f"{value / scale:.0f} {unit}"
    return f"{value} B"


def shorten(cmd: str, limit: int = CMD_PREVIEW_CHARS) -> str:
    flat = " ".join(cmd.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# What a terminal would act on rather than show: C0 controls but tab and newline, DEL, C1
# controls (U+009B is a CSI on its own), and bytes that were not UTF-8 (surrogate escapes).
# Task output holds them (`\x1b]52;c;...` writes the clipboard, `\x1b[2J` clears the screen).
_CONTROL_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\udc80-\udcff"
_TERMINAL_CONTROLS = re.compile(f"[{_CONTROL_CHARS}]")
# A name a task chose (a socket's path) is one line of text: tab and newline too, and what
# reorders or hides the text around it (bidi controls, zero-width characters, line separators).
_NAME_CONTROLS = re.compile(f"[\t\n{_CONTROL_CHARS}\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_ESCAPE = re.compile(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|.", re.S)


def escape_controls(text: str, *, one_line: bool = False) -> str:
    """`text` with every terminal control shown as `\\xNN` (the byte it stands for); `one_line`:
    tab, newline and the invisible formatting characters too (`\\u202e`)."""
    return (_NAME_CONTROLS if one_line else _TERMINAL_CONTROLS).sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code & 0xFF:02x}" if code < 0x100 or 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def json_chars(text: str) -> int:
    """What `text` without controls (escape_controls') costs inside a JSON string: `\\` and `"` take two."""
    return len(text) + text.count("\\") + text.count('"')


def shorten_middle(text: str, limit: int) -> str:
    """`text` (escaped by escape_controls) within `limit` JSON characters: its start and end around a
    `…`, no escape split; a unix socket's path says where it is and which file it is."""
    if json_chars(text) <= limit:
        return text
    pieces = _ESCAPE.findall(text)
    head = tail = 0  # pieces kept at each end
    room = limit - 1
    for end in (0, 1):  # the start gets half of the room, the end the rest
        share = (limit - 1) // 2 if end == 0 else room
        while head + tail < len(pieces):
            piece = json_chars(pieces[head] if end == 0 else pieces[-1 - tail])
            if piece > share:
                break
            share, room = share - piece, room - piece
            head, tail = (head + 1, tail) if end == 0 else (head, tail + 1)
    return "".join(pieces[:head]) + "…" + "".join(pieces[len(pieces) - tail :])


def ending_words(status: Status, exit_code: int | None, signal: str | None) -> str:
    """`done, exit 3` / `killed, SIGINT` / `running`: status first, then how the process ended."""
    if exit_code is not None:
        return f"{status.value}, exit {exit_code}"
    if signal is not None:
        return f"{status.value}, {signal}"
    return status.value
