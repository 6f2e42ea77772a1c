"""Fixtures of the container suite: one booted systemd-nspawn container per session.

Skips (with the reason) where the suite cannot run: not root, debootstrap or
systemd-nspawn missing (``apt-get install -y debootstrap systemd-container``),
or the rootfs cannot be built.  With ``HIVE_BASH_CONTAINER_REQUIRED=1`` (CI)
those are failures instead of skips, so a broken CI machine cannot pass green.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "vm-tests"))

import driver  # noqa: E402

REQUIRED = os.environ.get("HIVE_BASH_CONTAINER_REQUIRED", "") not in ("", "0")


def _cannot(reason: str):
    if REQUIRED:
        pytest.fail(f"container suite required but cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def container_host():
    """This host can boot containers (else a skip, or under CI a failure, with the reason)."""
    reason = driver.prerequisites_missing()
    if reason:
        _cannot(reason)


@pytest.fixture(scope="session")
def base_rootfs(container_host):
    """The cached base rootfs (debootstrap, built on first use): a bare Debian with systemd."""
    try:
        return driver.base_rootfs()
    except Exception as e:  # noqa: BLE001 - any build failure means "cannot run here"
        _cannot(f"could not build the container rootfs: {e}")


@pytest.fixture(scope="session")
def container(container_host):
    """A booted container with the checkout installed and the units enabled."""
    t0 = time.monotonic()
    try:
        machine = driver.make_hive_machine(log_console=bool(os.environ.get("HIVE_BASH_CONSOLE")))
    except Exception as e:  # noqa: BLE001 - any build failure means "cannot run here"
        _cannot(f"could not build the container rootfs or install the project: {e}")
    try:
        machine.start()
    except Exception:
        print(machine.console_tail(), file=sys.stderr)
        machine.cleanup()
        raise
    driver._log(f"container up in {time.monotonic() - t0:.1f}s (session dir {machine.session_dir})")
    yield machine
    t1 = time.monotonic()
    machine.cleanup()
    driver._log(f"container stopped and removed in {time.monotonic() - t1:.1f}s")


@pytest.fixture(scope="session")
def machine(container):
    """The container with hive-bash-daemon up and answering on its loopback port."""
    container.wait_for_unit("hive-bash-daemon.service", timeout=60)
    container.wait_for_open_port(7523, addr="127.0.0.1", timeout=60)
    return container
