"""hive_bash.tokens on real files: what a token may be, which token files are refused and why,
and a generated token file's mode and atomic replacement."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hive_bash.tokens import (
    MAX_TOKEN_FILE_BYTES,
    TokenError,
    check_token,
    ensure_token_file,
    generate_token_file,
    read_token_file,
)


def token_file(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_a_token_is_stripped_printable_ascii() -> None:
    assert check_token("  abc-DEF_123~!\n") == "abc-DEF_123~!"
    with pytest.raises(TokenError, match="is empty"):
        check_token(" \n")
    for bad in ("two words", "tab\there", "caf\xe9"):
        with pytest.raises(TokenError, match="printable ASCII"):
            check_token(bad)


def test_reading_a_sound_file(tmp_path: Path) -> None:
    assert read_token_file(token_file(tmp_path / "t", b"s3cret\n")) == ("s3cret", None)


def test_a_group_readable_file_is_read_with_a_warning(tmp_path: Path) -> None:
    token, warning = read_token_file(token_file(tmp_path / "t", b"s3cret", 0o640))
    assert token == "s3cret" and warning is not None and "0640" in warning


@pytest.mark.parametrize("mode", [0o604, 0o620, 0o666])
def test_a_file_others_may_read_or_the_group_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = token_file(tmp_path / "t", b"s3cret", mode)
    with pytest.raises(TokenError, match=f"mode {mode:04o}"):
        read_token_file(path)
    assert read_token_file(path, check_mode=False)[0] == "s3cret"  # a client's own copy


def test_what_is_not_a_token_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="No such file"):
        read_token_file(tmp_path / "missing")
    with pytest.raises(TokenError, match="not a regular file"):
        read_token_file(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(TokenError, match="not a regular file"):  # opened without blocking on a writer
        read_token_file(fifo)
    with pytest.raises(TokenError, match=f"larger than {MAX_TOKEN_FILE_BYTES}"):
        read_token_file(token_file(tmp_path / "big", b"a" * (MAX_TOKEN_FILE_BYTES + 1)))
    assert read_token_file(token_file(tmp_path / "fits", b"a" * MAX_TOKEN_FILE_BYTES))[0] == "a" * 4096
    with pytest.raises(TokenError, match="not UTF-8"):
        read_token_file(token_file(tmp_path / "latin1", b"caf\xe9"))


def test_a_generated_file_is_private_and_readable_back(tmp_path: Path) -> None:
    path = tmp_path / "token"
    token = generate_token_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_token_file(path) == (token, None)
    assert len(token) >= 40 and generate_token_file(path) != token
    assert [entry.name for entry in tmp_path.iterdir()] == ["token"]  # no temporary file left


def test_generating_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = token_file(tmp_path / "elsewhere", b"untouched", 0o644)
    link = tmp_path / "token"
    link.symlink_to(target)
    token = generate_token_file(link)
    assert not link.is_symlink() and read_token_file(link)[0] == token
    assert target.read_bytes() == b"untouched"


def test_ensure_keeps_a_sound_token_and_replaces_an_unsafe_or_broken_one(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "token"
    token, generated = ensure_token_file(path)
    assert generated and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert ensure_token_file(path) == (token, False)  # a restart keeps clients' configuration valid
    path.chmod(0o644)
    replaced, generated = ensure_token_file(path)
    assert generated and replaced != token and stat.S_IMODE(path.stat().st_mode) == 0o600
    token_file(path, b"", 0o600)
    assert ensure_token_file(path)[1]
