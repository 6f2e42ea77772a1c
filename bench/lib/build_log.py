"""A build-log-like output of N MiB, what bench/search.py searches and bench/wakeups.py matches as it is printed.

Blocks of about 1 MiB of compiler lines, each with one `error:` line in the middle; one block
in RARE_EVERY has a `fatal:` line instead.
"""

from __future__ import annotations

from pathlib import Path

from lib import measure

RARE_EVERY = 64


def block(special: str) -> bytes:
    """About 1 MiB of compiler lines with one special line in the middle."""
    lines: list[str] = []
    size = 0
    while size < measure.MIB:
        lines.append(f"[{len(lines):06d}] cc -O2 -Wall -Iinclude -c src/module_{len(lines) % 97}/file.c -o build/f.o")
        size += len(lines[-1]) + 1
    lines[len(lines) // 2] = special
    return ("\n".join(lines) + "\n").encode()


def printing_command(workdir: Path, size_mib: int) -> tuple[str, int]:
    """The shell command printing `size_mib` blocks (written into `workdir`), and the size it prints."""
    common, rare = workdir / "block.txt", workdir / "rare.txt"
    common.write_bytes(block("src/module_7/file_42.c:311:9: error: 'frobnicate' undeclared (first use here)"))
    rare.write_bytes(block("ld: fatal: cannot allocate 4294967296 bytes"))
    rares = size_mib // RARE_EVERY
    size = rares * rare.stat().st_size + (size_mib - rares) * common.stat().st_size
    cmd = (
        f"for i in $(seq {size_mib}); do if [ $((i % {RARE_EVERY})) = 0 ]; then cat {rare}; else cat {common}; fi; done"
    )
    return cmd, size
