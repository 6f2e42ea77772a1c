"""private_files.write_atomically: the one write-temp-then-rename (records, session states, the token, the
rendered config), on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hive_bash.private_files import write_atomically


def test_the_file_is_replaced_whole_with_exactly_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"old and longer than the new content")
    old_umask = os.umask(0o077)  # the umask takes no bit of the mode asked for
    try:
        write_atomically(path, b"new", mode=0o644)
    finally:
        os.umask(old_umask)
    assert path.read_bytes() == b"new"
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


@pytest.mark.parametrize("unique_temp", [False, True])
def test_a_symlink_at_the_name_is_replaced_never_followed(tmp_path: Path, unique_temp: bool) -> None:
    victim = tmp_path / "bashrc"
    victim.write_bytes(b"keep me")
    path = tmp_path / "token"
    path.symlink_to(victim)
    write_atomically(path, b"secret\n", durable=True, unique_temp=unique_temp)
    assert victim.read_bytes() == b"keep me"
    assert not path.is_symlink() and path.read_bytes() == b"secret\n"
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_symlink_planted_at_the_temp_name_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "bashrc"
    victim.write_bytes(b"keep me")
    path = tmp_path / "abc.json"
    (tmp_path / ".abc.json.tmp").symlink_to(victim)
    write_atomically(path, b"{}")
    assert victim.read_bytes() == b"keep me"
    assert path.read_bytes() == b"{}"
    assert not (tmp_path / ".abc.json.tmp").exists()


@pytest.mark.parametrize("unique_temp", [False, True])
def test_a_failed_rename_leaves_the_old_file_and_no_temp_file(tmp_path: Path, unique_temp: bool) -> None:
    path = tmp_path / "out"
    path.mkdir()  # a directory: the rename over it fails after the temp file is written
    (path / "inside").write_bytes(b"x")
    with pytest.raises(OSError):
        write_atomically(path, b"data", unique_temp=unique_temp)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (path / "inside").read_bytes() == b"x"


def test_a_missing_directory_raises_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "absent" / "mcp.json", b"{}", unique_temp=True)
    assert list(tmp_path.iterdir()) == []
