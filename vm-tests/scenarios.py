"""Scenarios for hive-bash-daemon as a systemd service, shared by two drivers.

Every ``scenario_*`` function takes a ``machine`` that offers the NixOS test
driver's API (``succeed``, ``fail``, ``execute``, ``wait_for_unit``,
``wait_for_open_port``, ``wait_until_succeeds``, ``wait_until_fails``,
``systemctl``, ``reboot``) and a :class:`Target` naming the unit, user, port
and harness state file; nothing else.  Drivers:

* the NixOS VM tests (``vm-tests/*.nix``): the machine is the agent *container*
  inside the VM, seen through :class:`NixosContainer` below::

      import sys; sys.path.insert(0, "${./.}")
      import scenarios
      agent = scenarios.NixosContainer(machine, "agent")
      scenarios.scenario_service_on_loopback(agent, scenarios.Target(...))

* the container suite here (``tests/container/test_scenarios.py``): a Debian
  container booted with systemd-nspawn (``tests/container/driver.py``).

Standard library only, no waiting by fixed sleeps: every wait is a condition
with a deadline (the driver's ``wait_until_*`` or :func:`wait_for` below).
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from collections.abc import Callable

if TYPE_CHECKING:
    # The NixOS test driver's own types: a typed stub in vm-tests/typing/ for mypy
    # (scripts/typecheck-scenarios.sh); the driver itself at run time.
    from test_driver.machine import QemuMachine

# The daemon's terminal status names (hive_bash.model.Status). A copy, because the
# NixOS test driver runs this file without hive_bash importable;
# tests/nix/test_vm_scenarios.py proves the copy equals the daemon's.
TERMINAL = ("done", "timed_out", "interrupted", "killed", "failed")

T = TypeVar("T")


@dataclass
class Target:
    """Names that differ between the NixOS module and the Debian container."""

    user: str = "agent"
    port: int = 7523
    unit: str = "hive-bash-daemon.service"
    harness_unit: str = "hive-harness.service"
    # JSON written by the reference harness (tests/harness.py or the stand-in):
    # {"todos": {key: body, ...}, ...}; a bare {key: body} is accepted too.
    harness_state: str = "/var/lib/hive-harness/state.json"
    cli: str = "hive-bash"
    # extra environment for the CLI, e.g. {"HIVE_BASH_PORT": "7600"}
    cli_env: dict[str, str] = field(default_factory=dict)


# The NixOS VM test's names: every scenario's default (the container suite passes its own).
NIXOS = Target()


class Machine(Protocol):
    """The part of the NixOS test driver's machine API the scenarios use, called as they call
    it (optional arguments by keyword). mypy proves the driver's QemuMachine and
    :class:`NixosContainer` below both are one; tests/container/driver.py offers the same."""

    def succeed(self, *commands: str, timeout: int | None = None) -> str: ...
    def fail(self, *commands: str, timeout: int | None = None) -> str: ...
    def execute(self, command: str, *, timeout: int | None = 900) -> tuple[int, str]: ...
    def wait_for_unit(self, unit: str, *, timeout: int = 900) -> None: ...
    def wait_for_open_port(self, port: int, addr: str = "localhost", *, timeout: int = 900) -> None: ...
    def wait_until_succeeds(self, command: str, *, timeout: int = 900) -> str: ...
    def wait_until_fails(self, command: str, *, timeout: int = 900) -> str: ...
    def reboot(self) -> None: ...


# ---------------------------------------------------------------------------
# helpers (built only on the machine API)


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 60, interval: float = 0.5) -> T:
    """Call ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - keep polling, report the last error
            last_exc = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last error: {last_exc}")
        time.sleep(interval)  # poll interval of a deadline-bounded condition wait


def as_user(t: Target, command: str) -> str:
    """A shell command line that runs ``command`` as the agent user."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in t.cli_env.items())
    inner = f"{env} {command}" if env else command
    return f"runuser -u {t.user} -- sh -c {shlex.quote(inner)}"


def cli(machine: Machine, t: Target, args: str) -> tuple[int, str]:
    """Run ``hive-bash ARGS`` as the agent user; (exit status, stdout)."""
    return machine.execute(as_user(t, f"{t.cli} {args}"))


def parse_json(out: str) -> dict[str, Any]:
    out = out.strip()
    try:
        data = json.loads(out)
    except ValueError:
        start, end = out.find("{"), out.rfind("}")
        if start < 0 or end < start:
            raise AssertionError(f"no JSON object in CLI output: {out!r}") from None
        data = json.loads(out[start : end + 1])
    if not isinstance(data, dict):
        raise AssertionError(f"CLI output is not a JSON object: {out!r}")
    return data


def cli_json(machine: Machine, t: Target, args: str) -> tuple[int, dict[str, Any]]:
    """``hive-bash --json ARGS`` (--json is a global option, before the command)."""
    status, out = cli(machine, t, f"--json {args}")
    return status, parse_json(out)


def run_task(
    machine: Machine, t: Target, cmd: str, *, wait: float = 0, name: str | None = None, timeout: float | None = None
) -> tuple[int, dict[str, Any]]:
    args = f"run {shlex.quote(cmd)} --wait {wait:g}"
    if name:
        args += f" --name {shlex.quote(name)}"
    if timeout is not None:
        args += f" --timeout {timeout:g}"
    return cli_json(machine, t, args)


def task_status(machine: Machine, t: Target, task_id: str, wait: float = 0) -> tuple[int, dict[str, Any]]:
    return cli_json(machine, t, f"status {shlex.quote(task_id)} --wait {wait:g}")


def wait_terminal(machine: Machine, t: Target, task_id: str, timeout: float = 60) -> dict[str, Any]:
    """Wait (status --wait, deadline-bounded) until the task is terminal; its JSON."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        _, res = task_status(machine, t, task_id, wait=max(1, min(30, int(left))))
        if res.get("status") in TERMINAL:
            return res
        if left <= 0:
            raise AssertionError(f"task {task_id} not finished after {timeout}s: {res}")


def read_todos(machine: Machine, t: Target) -> dict[str, str]:
    """The todos the harness holds now, key -> body text."""
    status, out = machine.execute(f"cat {shlex.quote(t.harness_state)}")
    if status != 0 or not out.strip():
        return {}
    data = json.loads(out)
    todos = data.get("todos", data) if isinstance(data, dict) else {}
    result = {}
    for key, value in todos.items():
        if isinstance(value, dict):
            value = value.get("body", json.dumps(value))
        result[str(key)] = str(value)
    return result


def wait_for_todo(machine: Machine, t: Target, key: str, *needles: str, timeout: float = 60) -> str:
    """Wait until the harness holds a todo ``key`` whose body contains all ``needles``."""

    def check() -> str | None:
        body = read_todos(machine, t).get(key)
        if body is not None and all(n.lower() in body.lower() for n in needles):
            return body
        return None

    return wait_for(f"todo {key!r} containing {needles}", check, timeout=timeout)


def wait_daemon_up(machine: Machine, t: Target, timeout: int = 60) -> None:
    machine.wait_for_unit(t.unit, timeout=timeout)
    machine.wait_for_open_port(t.port, "127.0.0.1", timeout=timeout)
    machine.wait_until_succeeds(f"curl -sf http://127.0.0.1:{t.port}/healthz", timeout=timeout)


def main_pid(machine: Machine, t: Target) -> int:
    return int(machine.succeed(f"systemctl show -P MainPID {t.unit}").strip() or 0)


def assert_no_process(machine: Machine, cmdline: str) -> None:
    """No process has exactly this command line (``pgrep -fx``: -f alone would also match
    the shell running the check, whose own command line contains the pattern)."""
    machine.fail(f"pgrep -fx {shlex.quote(cmdline)}")


# ---------------------------------------------------------------------------
# scenarios


def scenario_service_on_loopback(machine: Machine, t: Target = NIXOS) -> None:
    """The unit comes up and answers on loopback, and only there."""
    wait_daemon_up(machine, t)
    health = json.loads(machine.succeed(f"curl -sf http://127.0.0.1:{t.port}/healthz"))
    assert isinstance(health, dict), health
    # bash.requireToken (the default): on loopback too, a request without the token is refused
    refused = machine.succeed(
        f"curl -s -o /dev/null -w '%{{http_code}}' -X POST -H 'Content-Type: application/json' "
        f"-d '{{}}' http://127.0.0.1:{t.port}/mcp"
    ).strip()
    assert refused == "401", f"POST /mcp without the token answered {refused}"
    listeners = machine.succeed(f"ss -Hltn 'sport = :{t.port}'").strip().splitlines()
    assert listeners, "nothing listens on the daemon port"
    for line in listeners:
        local = line.split()[3]
        assert local.startswith(("127.", "[::1]", "::1")), f"listens beyond loopback: {line}"
    # every non-loopback address of the machine: nothing answers there
    addrs = machine.succeed("ip -o addr show scope global | awk '{print $4}' | cut -d/ -f1").split()
    for addr in addrs:
        host = f"[{addr}]" if ":" in addr else addr
        machine.fail(f"curl -sf --max-time 3 http://{host}:{t.port}/healthz")
    # the process serving it is the agent user's
    pid = main_pid(machine, t)
    assert machine.succeed(f"ps -o user= -p {pid}").strip() == t.user


def scenario_run_status_kill(machine: Machine, t: Target = NIXOS) -> None:
    """run / status / kill / ls / logs through the hive-bash CLI as the agent user.

    (Each CLI call costs a Python start; the daemon's tool semantics are covered by
    the unit tests, so this checks what the service adds: user, files, groups, exits.)
    """
    wait_daemon_up(machine, t)

    # a run that finishes inside its wait: exit code passes through, output is there
    status, res = run_task(machine, t, "echo hello-from-task; echo oops >&2; exit 3", wait=20)
    assert res["status"] == "done", res
    assert res["exit_code"] == 3, res
    assert status == 3, f"CLI exit status {status} should be the task's exit code 3"
    assert "hello-from-task" in res["stdout"], res
    assert "oops" in res["stderr"], res
    out_path = shlex.quote(res["stdout_path"])
    assert machine.succeed(f"cat {out_path}").strip() == "hello-from-task"
    assert machine.succeed(f"stat -c %U {out_path}").strip() == t.user
    first_id = res["id"]

    # status of a finished task answers the same, exit code included
    status, res = task_status(machine, t, first_id)
    assert (status, res["status"], res["exit_code"]) == (3, "done", 3), (status, res)

    # a named long task; its processes (a pipeline: one process group) alive, as the agent
    _, res = run_task(machine, t, "sleep 3101 | sleep 3102", name="sleeper", wait=0)
    assert res["id"] == "sleeper", res
    assert res["status"] in ("pending", "running"), res
    machine.wait_until_succeeds("pgrep -fx 'sleep 3101' && pgrep -fx 'sleep 3102'", timeout=30)
    assert machine.succeed("ps -o user= -p $(pgrep -fx 'sleep 3101')").strip() == t.user
    # the name is taken while it runs
    status, _ = cli(machine, t, "run 'true' --name sleeper --wait 0")
    assert status != 0, "a running task's name must be rejected"
    # listed (human output)
    assert "sleeper" in machine.succeed(as_user(t, f"{t.cli} ls"))

    # graceful kill (SIGINT to the group): the whole group ends, status killed
    machine.succeed(as_user(t, f"{t.cli} kill sleeper"))
    res = wait_terminal(machine, t, "sleeper", timeout=30)
    assert res["status"] == "killed", res
    machine.wait_until_fails("pgrep -fx 'sleep 310[12]'", timeout=10)

    # a task that ignores SIGINT: --force (SIGKILL) ends it
    _, res = run_task(machine, t, "trap '' INT; sleep 3103; echo survived", name="stubborn", wait=0)
    machine.wait_until_succeeds("pgrep -fx 'sleep 3103'", timeout=30)
    machine.succeed(as_user(t, f"{t.cli} kill stubborn --force"))
    res = wait_terminal(machine, t, "stubborn", timeout=30)
    assert res["status"] == "killed", res
    assert "survived" not in res.get("stdout", ""), res
    machine.wait_until_fails("pgrep -fx 'sleep 3103'", timeout=10)

    # logs prints the raw output
    out = machine.succeed(as_user(t, f"{t.cli} logs {shlex.quote(first_id)}"))
    assert "hello-from-task" in out, out


def scenario_completion_todo(machine: Machine, t: Target = NIXOS) -> None:
    """A task's completion reaches the harness socket as a keyed todo; status clears it."""
    wait_daemon_up(machine, t)
    machine.wait_for_unit(t.harness_unit, timeout=30)
    # the task waits for a file, so "running" is observable before it ends
    gate = "/tmp/hive-todo-gate"
    machine.succeed(f"rm -f {gate}")
    _, res = run_task(
        machine,
        t,
        f"while [ ! -e {gate} ]; do sleep 0.1; done; echo todo-output; exit 4",
        name="todo-check",
        wait=0,
    )
    key = res["id"]
    assert key == "todo-check", res
    wait_for_todo(machine, t, key, "running", timeout=30)
    machine.succeed(f"touch {gate}")
    body = wait_for_todo(machine, t, key, "exit 4", "Read(", timeout=30)
    out_path = "/" + body.split("Read(/", 1)[1].split(")", 1)[0]
    assert out_path.endswith(".out"), body
    assert machine.succeed(f"cat {shlex.quote(out_path)}").strip() == "todo-output"
    # observing the terminal result clears the todo
    status, res = task_status(machine, t, key)
    assert (status, res["status"], res["exit_code"]) == (4, "done", 4), res
    wait_for(f"todo {key} cleared", lambda: key not in read_todos(machine, t), timeout=30)
    # an inline-completed run leaves no todo behind
    _, res = run_task(machine, t, "echo quick", name="inline-done", wait=20)
    assert res["status"] == "done", res
    wait_for("no todo for inline-done", lambda: "inline-done" not in read_todos(machine, t), timeout=30)


def _start_long_task(machine: Machine, t: Target, name: str, marker: int) -> None:
    """A named task whose group has two processes (``sleep MARKER`` and ``sleep MARKER+1``)."""
    _, res = run_task(machine, t, f"sleep {marker} & sleep {marker + 1}; wait", name=name, wait=0)
    assert res["id"] == name, res
    assert res["status"] in ("pending", "running"), res
    machine.wait_until_succeeds(f"pgrep -fx 'sleep {marker}' && pgrep -fx 'sleep {marker + 1}'", timeout=30)


def _assert_interrupted(machine: Machine, t: Target, name: str, marker: int) -> None:
    machine.wait_until_fails(f"pgrep -fx 'sleep {marker}' || pgrep -fx 'sleep {marker + 1}'", timeout=30)
    wait_daemon_up(machine, t)
    # the todo first (a status call clears it), then status
    wait_for_todo(machine, t, name, "interrupted", timeout=60)
    _, res = task_status(machine, t, name)
    assert res["status"] == "interrupted", res


def scenario_restart_interrupts(machine: Machine, t: Target = NIXOS) -> None:
    """`systemctl restart` during a task: processes gone, task interrupted, a todo says so."""
    wait_daemon_up(machine, t)
    _start_long_task(machine, t, "restart-victim", 3201)
    machine.succeed(f"systemctl restart {t.unit}")
    # stop is synchronous: by now the daemon ended the task's group
    assert_no_process(machine, "sleep 3201")
    assert_no_process(machine, "sleep 3202")
    _assert_interrupted(machine, t, "restart-victim", 3201)


def scenario_sigkill_restarts(machine: Machine, t: Target = NIXOS) -> None:
    """`systemctl kill -s KILL`: systemd restarts the daemon; the task reads interrupted."""
    wait_daemon_up(machine, t)
    _start_long_task(machine, t, "sigkill-victim", 3301)
    old = main_pid(machine, t)
    machine.succeed(f"systemctl kill -s KILL {t.unit}")
    wait_for(
        "a new daemon process",
        lambda: main_pid(machine, t) not in (0, old),
        timeout=60,
    )
    assert int(machine.succeed(f"systemctl show -P NRestarts {t.unit}").strip()) >= 1
    _assert_interrupted(machine, t, "sigkill-victim", 3301)


def scenario_main_sigkilled_alone(machine: Machine, t: Target = NIXOS) -> None:
    """Only the daemon's main process SIGKILLed (tasks left alive by the kill itself):
    after the restart the task's processes are gone all the same and it reads interrupted."""
    wait_daemon_up(machine, t)
    _start_long_task(machine, t, "orphan-victim", 3401)
    old = main_pid(machine, t)
    machine.succeed(f"systemctl kill --kill-whom=main -s KILL {t.unit}")
    wait_for("a new daemon process", lambda: main_pid(machine, t) not in (0, old), timeout=90)
    _assert_interrupted(machine, t, "orphan-victim", 3401)


def scenario_reboot_survives(machine: Machine, t: Target = NIXOS) -> None:
    """A reboot of the machine: finished records and their output survive; a running task
    reads interrupted afterwards."""
    wait_daemon_up(machine, t)
    status, res = run_task(machine, t, "echo survives-reboot; exit 7", name="before-reboot", wait=20)
    assert (status, res["status"], res["exit_code"]) == (7, "done", 7), res
    out_path = res["stdout_path"]
    _start_long_task(machine, t, "reboot-victim", 3501)

    machine.reboot()

    wait_daemon_up(machine, t, timeout=120)
    status, res = task_status(machine, t, "before-reboot")
    assert (status, res["status"], res["exit_code"]) == (7, "done", 7), res
    assert "survives-reboot" in res["stdout"], res
    assert machine.succeed(f"cat {shlex.quote(out_path)}").strip() == "survives-reboot"
    assert_no_process(machine, "sleep 3501")
    wait_for_todo(machine, t, "reboot-victim", "interrupted", timeout=60)
    _, res = task_status(machine, t, "reboot-victim")
    assert res["status"] == "interrupted", res


# run order for a driver that keeps one machine for all (the reboot last: slowest)
SCENARIOS = [
    scenario_service_on_loopback,
    scenario_run_status_kill,
    scenario_completion_todo,
    scenario_restart_interrupts,
    scenario_sigkill_restarts,
    scenario_main_sigkilled_alone,
    scenario_reboot_survives,
]


# ---------------------------------------------------------------------------
# NixOS VM tests: the agent runs in a NixOS container inside the test VM


class NixosContainer:
    """The ``machine`` API for a NixOS container ``name`` inside a NixOS test VM ``host``.

    Commands run in the container as root (``nixos-container run``); units are
    the container's.  ``reboot()`` restarts the container (its state dir under
    /var/lib/nixos-containers survives, as on a real host).

    Current ``nixos-container run`` goes through ``systemd-run --machine --pty``:
    the exit status passes through, but stdout and stderr share the pty and lines
    end in CRLF.  Outputs are returned with plain LF, as the other drivers give them.
    """

    def __init__(self, host: QemuMachine, name: str = "agent") -> None:
        self.host = host
        self.name = name

    def _wrap(self, command: str) -> str:
        return f"nixos-container run {self.name} -- bash -lc {shlex.quote(command)}"

    @staticmethod
    def _lf(output: str) -> str:
        return output.replace("\r\n", "\n")

    def execute(self, command: str, *, timeout: int | None = 900) -> tuple[int, str]:
        status, output = self.host.execute(self._wrap(command), timeout=timeout)
        return status, self._lf(output)

    def succeed(self, *commands: str, timeout: int | None = None) -> str:
        return "".join(self._lf(self.host.succeed(self._wrap(c), timeout=timeout)) for c in commands)

    def fail(self, *commands: str, timeout: int | None = None) -> str:
        return "".join(self._lf(self.host.fail(self._wrap(c), timeout=timeout)) for c in commands)

    def wait_until_succeeds(self, command: str, *, timeout: int = 900) -> str:
        return self._lf(self.host.wait_until_succeeds(self._wrap(command), timeout=timeout))

    def wait_until_fails(self, command: str, *, timeout: int = 900) -> str:
        return self._lf(self.host.wait_until_fails(self._wrap(command), timeout=timeout))

    def systemctl(self, q: str) -> tuple[int, str]:
        return self.execute(f"systemctl {q}")

    def wait_for_unit(self, unit: str, *, timeout: int = 900) -> None:
        self.host.wait_for_unit(f"container@{self.name}.service", timeout=timeout)
        self.wait_until_succeeds(f"systemctl is-active {shlex.quote(unit)}", timeout=timeout)

    def wait_for_open_port(self, port: int, addr: str = "localhost", *, timeout: int = 900) -> None:
        self.wait_until_succeeds(f"nc -z {addr} {port}", timeout=timeout)

    def start(self) -> None:
        self.host.succeed(f"nixos-container start {self.name}")

    def shutdown(self) -> None:
        self.host.succeed(f"nixos-container stop {self.name}")

    def reboot(self) -> None:
        self.host.succeed(f"nixos-container restart {self.name}")
        self.host.wait_for_unit(f"container@{self.name}.service")


if TYPE_CHECKING:
    # For mypy only: the driver's VM and the container seen through it both offer what the
    # scenarios call, with signatures that accept the scenarios' calls.
    def _a_vm_is_a_machine(vm: QemuMachine) -> Machine:
        return vm

    def _a_nixos_container_is_a_machine(container: NixosContainer) -> Machine:
        return container


# ---------------------------------------------------------------------------
# a scenario that needs a memory limit on the unit (vm-tests/oom-killed.nix
# sets MemoryMax); not in SCENARIOS, whose drivers run the unit without one

MIB = 1024 * 1024


def scenario_oom_killed(machine: Machine, t: Target = NIXOS, limit_mib: int = 256) -> None:
    """A task allocating past the unit's MemoryMax is killed by the kernel's OOM killer;
    the daemon lives on (OOMPolicy=continue) and the task's reading says OOM and names
    the limit. A SIGKILL sent by `kill` in the same cgroup is not blamed on it."""
    wait_daemon_up(machine, t)
    daemon = main_pid(machine, t)
    # bash keeps a command substitution's output in its own memory: it grows past the limit
    grow = f"echo growing; x=$(head -c {limit_mib * 3}M /dev/zero | tr '\\0' a); echo survived"
    _, res = run_task(machine, t, grow, name="oom-victim", wait=0)
    body = wait_for_todo(machine, t, "oom-victim", "OOM killer", timeout=120)
    assert f"memory limit {limit_mib} MiB" in body and "memory.max" in body, body
    assert "last stdout lines:" in body and "growing" in body, body
    status, res = task_status(machine, t, "oom-victim")
    assert res["status"] == "done" and (res["signal"] == "SIGKILL" or res["exit_code"] == 137), res
    assert status == 137, status
    assert "OOM killer" in res["diagnosis"] and list(res)[:2] == ["verdict", "diagnosis"], res
    assert limit_mib * MIB // 2 < res["max_rss_bytes"] <= limit_mib * MIB, res
    assert "survived" not in res.get("stdout", ""), res
    assert main_pid(machine, t) == daemon, "the daemon itself must survive the task's OOM kill"

    # the OOM-kill count has risen; a SIGKILL from `kill` now must still read as kill
    _, res = run_task(machine, t, "sleep 3601", name="force-killed", wait=0)
    machine.wait_until_succeeds("pgrep -fx 'sleep 3601'", timeout=30)
    machine.succeed(as_user(t, f"{t.cli} kill force-killed --force"))
    res = wait_terminal(machine, t, "force-killed", timeout=30)
    assert res["status"] == "killed" and "diagnosis" not in res, res


# ---------------------------------------------------------------------------
# a cgroup per task (vm-tests/cgroup-limits.nix): the module sets Delegate=yes, and the
# kernel of the test VM has the memory and pids controllers the host here lacks

ESCAPE_MARK = "sleep 3602"


def scenario_task_limits(machine: Machine, t: Target = NIXOS) -> None:
    """Each task has a cgroup of its own: memory_max and pids_max end a task `failed` with the
    reason (its todo says so), the daemon lives on, a setsid'd child ends with its task, and
    no task cgroup is left behind."""
    wait_daemon_up(machine, t)
    daemon = main_pid(machine, t)
    unit_cgroup = machine.succeed(f"systemctl show -P ControlGroup {t.unit}").strip()
    root = f"/sys/fs/cgroup{unit_cgroup}"
    machine.succeed(f"grep -qx {daemon} {root}/daemon/cgroup.procs")

    grow = "echo growing; x=$(head -c 192M /dev/zero | tr '\\0' a); echo survived"
    cli(machine, t, f"run {shlex.quote(grow)} --wait 0 --name mem-capped --memory-max 64M")
    body = wait_for_todo(machine, t, "mem-capped", "memory limit 64 MiB reached", timeout=120)
    assert "failed" in body, body
    res = wait_terminal(machine, t, "mem-capped")
    assert res["status"] == "failed" and res["end_reason"] == "memory limit 64 MiB reached", res
    assert "survived" not in res.get("stdout", ""), res
    assert main_pid(machine, t) == daemon, "a task's own limit must not touch the daemon"

    forks = "for i in $(seq 20); do sleep 60 & done; wait"
    cli(machine, t, f"run {shlex.quote(forks)} --wait 0 --name pids-capped --pids-max 8")
    res = wait_terminal(machine, t, "pids-capped", timeout=120)
    assert res["status"] == "failed" and res["end_reason"].startswith("process limit 8 reached"), res

    scenario_setsid_escape_closed(machine, t)
    machine.fail(f"ls -d {root}/task-*")


def scenario_setsid_escape_closed(machine: Machine, t: Target = NIXOS) -> None:
    """A child that leaves its task's session with setsid ends with the task: its cgroup holds it."""
    escape = f'setsid {ESCAPE_MARK} & until [ "$(cat /proc/$!/comm)" = sleep ]; do :; done; echo escaped'
    _, res = run_task(machine, t, escape, wait=20, name="escape")
    assert res["status"] == "done" and res["stdout"] == "escaped\n", res
    machine.wait_until_fails(f"pgrep -fx {shlex.quote(ESCAPE_MARK)}", timeout=10)
