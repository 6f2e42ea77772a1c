"""The NixOS test driver's ``machine`` API, built on one method: ``execute``.

Shared by the drivers that run ``vm-tests/scenarios.py`` here: the systemd-nspawn
container (``tests/container/driver.py``) and the qemu VM with its agent container
(``tests/vm/vmdriver.py``).  A driver subclasses :class:`MachineApi` and provides
``execute(command, timeout=...) -> (status, stdout)``, keeping the command's stderr
in ``last_stderr`` for error messages.

``time_scale`` stretches every wait: a machine under software emulation (qemu's TCG)
runs Python 12-20x slower than this host, so a scenario's "within 30 s" is the same
condition given more wall time there.  The container runs at 1.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable


class MachineError(Exception):
    """A command or wait failed; the message carries the command and its output."""


class MachineApi:
    """succeed/fail/wait_*/systemctl/get_unit_* on top of the driver's ``execute``."""

    name = "machine"
    last_stderr = ""
    time_scale = 1.0

    def execute(
        self, command: str, check_return: bool = True, check_output: bool = True, timeout: float | None = 900
    ) -> tuple[int, str]:
        raise NotImplementedError

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    @staticmethod
    def _pause(seconds: float = 0.2) -> None:
        # the driver's poll interval; tests themselves only wait on conditions
        time.sleep(seconds)

    def succeed(self, *commands: str, timeout: float | None = None) -> str:
        output = ""
        for command in commands:
            status, out = self.execute(command, timeout=timeout if timeout is not None else 900)
            if status != 0:
                raise MachineError(
                    f"command `{command}` failed (exit code {status})\n"
                    f"stdout:\n{out[-8000:]}\nstderr:\n{self.last_stderr[-8000:]}"
                )
            output += out
        return output

    def fail(self, *commands: str, timeout: float | None = None) -> str:
        output = ""
        for command in commands:
            status, out = self.execute(command, timeout=timeout if timeout is not None else 900)
            if status == 0:
                raise MachineError(f"command `{command}` unexpectedly succeeded\n{out}")
            output += out
        return output

    def _retry(self, what: str, fn: Callable[[bool], bool], timeout: float) -> None:
        deadline = time.monotonic() + self.scaled(timeout)
        while True:
            last = time.monotonic() > deadline
            if fn(last):
                return
            if last:
                raise MachineError(f"{what}: not true within {self.scaled(timeout):g}s")
            self._pause(0.25)

    def wait_until_succeeds(self, command: str, timeout: int = 900) -> str:
        output = ""

        def check(last: bool) -> bool:
            nonlocal output
            status, output = self.execute(command, timeout=timeout)
            if last and status != 0:
                raise MachineError(
                    f"`{command}` did not succeed within {timeout}s; last output:\n"
                    f"{output[-8000:]}\nstderr:\n{self.last_stderr[-8000:]}"
                )
            return status == 0

        self._retry(command, check, timeout)
        return output

    def wait_until_fails(self, command: str, timeout: int = 900) -> str:
        output = ""

        def check(last: bool) -> bool:
            nonlocal output
            status, output = self.execute(command, timeout=timeout)
            return status != 0

        self._retry(f"`{command}` to fail", check, timeout)
        return output

    def systemctl(self, q: str, user: str | None = None) -> tuple[int, str]:
        if user is not None:
            q = q.replace("'", "\\'")
            return self.execute(
                f"su -l {user} --shell /bin/sh -c $'XDG_RUNTIME_DIR=/run/user/`id -u` systemctl --user {q}'"
            )
        return self.execute(f"systemctl {q}")

    def get_unit_info(self, unit: str, user: str | None = None) -> dict[str, str]:
        status, lines = self.systemctl(f'--no-pager show "{unit}"', user)
        if status != 0:
            raise MachineError(f'retrieving systemctl info for unit "{unit}" failed ({status})\n{lines}')
        info = {}
        for line in lines.splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                info[k] = v
        return info

    def get_unit_property(self, unit: str, property: str, user: str | None = None) -> str:
        status, out = self.systemctl(f'--no-pager show "{unit}" --property="{property}" --value', user)
        if status != 0:
            raise MachineError(f"retrieving {property} of {unit} failed\n{out}")
        return out.rstrip("\n")

    def require_unit_state(self, unit: str, require_state: str = "active") -> None:
        state = self.get_unit_info(unit)["ActiveState"]
        if state != require_state:
            raise MachineError(f"Expected unit '{unit}' to be in state '{require_state}' but it is in state '{state}'")

    def wait_for_unit(self, unit: str, user: str | None = None, timeout: int = 900) -> None:
        def check(last: bool) -> bool:
            info = self.get_unit_info(unit, user)
            state = info["ActiveState"]
            if state == "failed":
                raise MachineError(f'unit "{unit}" reached state "{state}"')
            if state == "inactive":
                status, jobs = self.systemctl("list-jobs --full 2>&1", user)
                # same as the NixOS driver: inactive with nothing queued will not change
                nothing_queued = "No jobs" in jobs and info.get("LoadState") != "not-found"
                if nothing_queued and (info.get("UnitFileState") not in ("enabled", "static", "generated") or last):
                    raise MachineError(f'unit "{unit}" is inactive and there are no pending jobs')
            return state == "active"

        self._retry(f"unit {unit} active", check, timeout)

    def wait_for_open_port(self, port: int, addr: str = "localhost", timeout: int = 900) -> None:
        self.wait_until_succeeds(f"timeout 2 bash -c '</dev/tcp/{addr}/{port}'", timeout=timeout)

    def wait_for_closed_port(self, port: int, addr: str = "localhost", timeout: int = 900) -> None:
        self.wait_until_fails(f"timeout 2 bash -c '</dev/tcp/{addr}/{port}'", timeout=timeout)

    def wait_for_file(self, filename: str, timeout: int = 900) -> None:
        self.wait_until_succeeds(f"test -e {shlex.quote(filename)}", timeout=timeout)
