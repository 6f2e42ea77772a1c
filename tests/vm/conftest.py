"""Fixtures of the qemu suite: a booted qemu VM per test module, the agent in its container.

Skips (with the reason) where the suite cannot run: not root, or debootstrap,
systemd-nspawn, qemu-system-x86_64, qemu-img or mkfs.ext4 missing
(``apt-get install -y debootstrap systemd-container qemu-system-x86 qemu-utils``).
With ``HIVE_BASH_VM_REQUIRED=1`` (CI) those are failures instead of skips.

Every wait is stretched by ``HIVE_BASH_VM_TIME_SCALE`` (default 8): the driver's own
(``machine_api``) and the scenarios' (``scenarios.wait_for``/``wait_terminal`` read
``scenarios.time``, which the ``scaled_scenario_clock`` fixture below runs slower), so
``vm-tests/scenarios.py`` runs unchanged on an emulated CPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "vm-tests"))

import scenarios  # noqa: E402
import vmdriver  # noqa: E402

REQUIRED = os.environ.get("HIVE_BASH_VM_REQUIRED", "") not in ("", "0")
T = scenarios.Target()


def _cannot(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"qemu suite required but cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


class ScaledClock:
    """``time`` for the scenarios module, its ``monotonic`` running ``scale`` times slower."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._origin = time.monotonic()

    def monotonic(self) -> float:
        return self._origin + (time.monotonic() - self._origin) / self.scale

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


@pytest.fixture(autouse=True)
def scaled_scenario_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scenarios, "time", ScaledClock(vmdriver.TIME_SCALE))


@pytest.fixture(scope="module")
def vm(request: pytest.FixtureRequest) -> Iterator[vmdriver.Vm]:
    """A booted VM (its container started by its unit) for the module's tests."""
    reason = vmdriver.prerequisites_missing()
    if reason:
        _cannot(reason)
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    try:
        machine = vmdriver.make_hive_vm(name=name)
    except Exception as e:  # noqa: BLE001 - any build failure means "cannot run here"
        _cannot(f"could not build the VM image or install the project: {e}")
    try:
        machine.start(timeout=180)
    except Exception:
        print(machine.console_tail(), file=sys.stderr)
        machine.cleanup()
        raise
    yield machine
    t0 = time.monotonic()
    machine.cleanup()
    boots = ", ".join(f"{s:.0f}s" for s in machine.boot_seconds)
    # shown whatever pytest captures: the boot times are the suite's own measure of the machine
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n[vm] {name}: boots to a running guest took {boots}; stopped in {time.monotonic() - t0:.1f}s")


@pytest.fixture(scope="module")
def agent(vm: vmdriver.Vm) -> vmdriver.GuestContainer:
    """The agent container in the VM with hive-bash-daemon up on its loopback port."""
    container = vmdriver.GuestContainer(vm)
    container.start()
    scenarios.wait_daemon_up(container, T, timeout=60)
    return container


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def journal_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """A failed test's output ends with the daemon's and the harness's journal in the container."""
    yield
    if request.node.stash.get(FAILED, False) and "agent" in request.fixturenames:
        container = request.getfixturevalue("agent")
        with contextlib.suppress(Exception):
            _, out = container.execute(f"journalctl -b --no-pager -n 200 -u {T.unit} -u {T.harness_unit}", timeout=60)
            print(out)
