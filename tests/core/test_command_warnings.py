"""hive_bash.core.command_warnings on its own: the table of destructive-looking commands."""

from __future__ import annotations

import pytest

from hive_bash.core import command_warnings


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf /",
        "rm -rf ~/project",
        "sudo rm -fr /var/lib/x",
        "rm -r -f $DIR/",
        "rm --recursive --force ..",
        "git push --force origin main",
        "git push -f",
        "git reset --hard HEAD~3",
        "mkfs.ext4 /dev/sdb1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "psql -c 'DROP TABLE users'",
        "chmod -R 777 /",
        "git clean -fdx",
        "kubectl delete ns prod",
        "terraform destroy -auto-approve",
        "echo x > /dev/sda",
        "cd /tmp && rm -rf *",
    ],
)
def test_warning_table_flags_destructive_commands(cmd: str) -> None:
    assert command_warnings.command_warning(cmd) is not None


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf ./build",
        "rm -rf build dist node_modules",
        "rm -f file.txt",
        "rm -r olddir",
        "git push origin main",
        "git push --force-with-lease",
        "git reset --soft HEAD~1",
        "dd if=/dev/zero of=./disk.img bs=1M count=1",
        "echo 'rm -rf /' is dangerous",
        "grep -r 'DROP' .",
        "chmod -R 755 ./site",
        "ls -la",
    ],
)
def test_warning_table_leaves_ordinary_commands_alone(cmd: str) -> None:
    assert command_warnings.command_warning(cmd) is None
