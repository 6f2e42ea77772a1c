"""A qemu VM driver exposing the NixOS test driver's ``machine`` API, with the agent in a
container inside the VM, as hyperhive runs agents.

The scenarios of ``vm-tests/scenarios.py`` run here on a kernel of their own: a Debian
trixie guest (kernel 6.12, systemd 257, Python 3.13) booted by qemu under software
emulation (TCG: no usable KVM here), whose unified cgroup hierarchy has the memory and
pids controllers this host binds to cgroup v1.  Inside the guest the agent lives in a
systemd-nspawn container started by ``hive-container@agent.service`` (``Delegate=yes``,
as NixOS's ``container@.service``); in that container ``hive-bash-daemon.service`` is the
container suite's unit, the one ``tests/nix/test_unit_equivalence.py`` proves equal to
what the NixOS module renders.

Layout
------
* **Layers** (cached, shared with the container suite's code in
  ``tests/container/driver.py``): a trixie ``debootstrap`` with :data:`VM_PACKAGES` (the
  container suite's packages plus the cloud kernel, which has NVMe and ext4 built in, so
  it boots with no initramfs, udev, kmod and systemd-container), the project's
  dependencies as cp313 wheels in the venv ``/opt/hive-bash``.
* **Image** (cached, keyed by every input: the layers, the checkout's wheel contents,
  the units, the harness, this driver's guest files): one ext4 made by ``mkfs.ext4 -d``
  from the guest's root, an overlay of the base and :func:`guest_files`, with the
  container's root (an overlay of base, deps and the checkout installed by the
  container suite's :func:`driver.install_checkout`) at ``/var/lib/machines/agent``.
  A checkout change costs one ``mkfs`` (seconds), not a debootstrap.
* **Session**: a qcow2 overlay over the image (``qemu-img create -b``), so every session
  boots clean, several share the image, and a reboot or crash keeps the disk as a real
  machine does (``snapshot=on`` would lose it when qemu exits, and ``-no-reboot`` makes a
  guest reboot exit qemu).

Commands reach the guest through ``tests/vm/guest_agent.py`` over qemu's user network:
``hostfwd=tcp:127.0.0.1:PORT-:7600``, a free port per boot.  The serial console goes to
``<session>/console.log``.

``HIVE_BASH_VM_TIME_SCALE`` (default 8) stretches every wait, see ``machine_api``.
Cache root: the container suite's (``$HIVE_BASH_TEST_CACHE``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import hashlib
import json
import os
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "container"))

import driver as ct  # noqa: E402  (the container suite's layers, wheel and units)
from machine_api import MachineApi, MachineError  # noqa: E402

SCRIPT_VERSION = "1"
SUITE = "trixie"
GUEST_PYTHON = "3.13"
VM_PACKAGES = ct.BASE_PACKAGES + ("udev", "kmod", "systemd-container", "linux-image-cloud-amd64")
AGENT_PORT = 7600
CONTAINER = "agent"
IMAGE_SIZE = "2G"
MEMORY_MIB = 2048
TIME_SCALE = float(os.environ.get("HIVE_BASH_VM_TIME_SCALE", "8"))
APPEND = "console=ttyS0 root=/dev/nvme0n1 rootfstype=ext4 rw panic=-1 mitigations=off net.ifnames=0 quiet"
SESSION_PREFIX = "hive-bash-vm-"
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In the child before exec: SIGKILL when the test process dies, however it dies (a CI timeout's
    SIGTERM or SIGKILL runs no atexit), so a booted VM never outlives its run; qemu is one process.
    The signal follows the forking thread, so VMs are started from the test's own (main) thread."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


# Units of the guest that a headless boot does not need (or that would wait on a console).
MASKED = (
    "systemd-firstboot.service",
    "serial-getty@ttyS0.service",
    "getty@tty1.service",
    "getty.target",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "systemd-pstore.service",
)

AGENT_UNIT = f"""\
[Unit]
Description=hive-bash test driver's agent (commands from the host over qemu's forwarded port)
Requires=sys-subsystem-net-devices-eth0.device
After=sys-subsystem-net-devices-eth0.device

[Service]
# qemu's user network: the guest is 10.0.2.15, no DHCP wait
ExecStartPre=ip link set eth0 up
ExecStartPre=-ip addr add 10.0.2.15/24 dev eth0
ExecStartPre=-ip route add default via 10.0.2.2
ExecStart=/usr/bin/python3 /opt/hive-vm/guest_agent.py {AGENT_PORT}
StandardOutput=journal+console
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
"""

# As NixOS's container@.service starts a NixOS container (the hyperhive agent's home).
CONTAINER_UNIT = """\
[Unit]
Description=agent container %i (systemd-nspawn, booted)
After=network.target

[Service]
Type=notify
ExecStart=systemd-nspawn --quiet --keep-unit --boot --notify-ready=yes --register=no \\
    --private-network --link-journal=no --machine=%i --directory=/var/lib/machines/%i
KillMode=mixed
Delegate=yes
# `reboot` in the container ends nspawn with 133: start it again
SuccessExitStatus=133
RestartForceExitStatus=133
Restart=on-failure
TimeoutStartSec=15min
TimeoutStopSec=5min

[Install]
WantedBy=multi-user.target
"""


def _log(msg: str) -> None:
    print(f"[vm] {msg}", file=sys.stderr, flush=True)


def prerequisites_missing() -> str | None:
    """Why the qemu suite cannot run here, or None."""
    reason = ct.prerequisites_missing()
    if reason:
        return reason.replace("container tests", "qemu VM tests")
    missing = [t for t in ("qemu-system-x86_64", "qemu-img", "mkfs.ext4") if not shutil.which(t)]
    if missing:
        return f"missing {', '.join(missing)}: apt-get install -y qemu-system-x86 qemu-utils e2fsprogs"
    return None


def guest_files() -> dict[str, str]:
    """The guest's own files (beside the base), guest path -> text; symlinks as '@target'."""
    files = {
        "/etc/hostname": "hive-vm\n",
        "/etc/fstab": "# the root is given on the kernel command line\n",
        "/opt/hive-vm/guest_agent.py": (HERE / "guest_agent.py").read_text(),
        "/opt/hive-vm/container_leader.py": (ct.HERE / "container_leader.py").read_text(),
        "/etc/systemd/system/hive-test-agent.service": AGENT_UNIT,
        "/etc/systemd/system/hive-container@.service": CONTAINER_UNIT,
        "/etc/systemd/system/multi-user.target.wants/hive-test-agent.service": "@../hive-test-agent.service",
        f"/etc/systemd/system/multi-user.target.wants/hive-container@{CONTAINER}.service": (
            "@../hive-container@.service"
        ),
    }
    files.update({f"/etc/systemd/system/{unit}": "@/dev/null" for unit in MASKED})
    return files


def _write_files(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if text.startswith("@"):
            dest.symlink_to(text[1:])
        else:
            dest.write_text(text)


def wheel_digest(wheel: Path) -> str:
    """The wheel's contents (names and bytes, not its zip timestamps)."""
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            h.update(name.encode() + b"\0" + z.read(name) + b"\0")
    return h.hexdigest()


def _inputs_digest() -> str:
    """Everything of the container suite that goes into the container's root besides the wheel."""
    h = hashlib.sha256()
    for f in [*(ct.HERE / u for u in ct.UNIT_FILES), ct.HERE / "mcp-servers.json", ct.harness_script()]:
        h.update(f.read_bytes())
    return h.hexdigest()


def image(wheel: Path) -> tuple[Path, Path]:
    """(ext4 image, kernel) for this checkout's wheel; built when an input changed."""
    base = ct.base_rootfs(suite=SUITE, packages=VM_PACKAGES, tag="vm-rootfs", niceness=5)
    deps = ct.deps_layer(base, ct.dependency_wheels(GUEST_PYTHON))
    key = ct._key(
        base.name, deps.name, wheel_digest(wheel), _inputs_digest(), guest_files(), IMAGE_SIZE, SCRIPT_VERSION
    )
    img = ct.cache_root() / f"vm-image-{key}.ext4"
    kernel = ct.cache_root() / f"vm-kernel-{base.name}"
    if not kernel.exists():
        vmlinuz = sorted((base / "boot").glob("vmlinuz-*"))[-1]
        shutil.copy2(vmlinuz, kernel.with_suffix(".tmp"))
        kernel.with_suffix(".tmp").rename(kernel)
    if img.exists():
        return img, kernel
    with ct._locked(ct.cache_root() / "vm-image.lock"):
        if img.exists():
            return img, kernel
        t0 = time.monotonic()
        _log(f"building {img.name}: the guest's root with the agent container's inside")
        agent = ct.Machine(name=CONTAINER, lowers=[deps, base])
        vmroot = agent.session_dir / "vmroot"
        inner = vmroot / "var/lib/machines" / CONTAINER
        try:
            # the container's root: the checkout installed as in the container suite, no kernel
            ct.install_checkout(
                agent,
                wheel,
                script=f"""
                rm -rf /usr/lib/modules/* /boot/*
                systemctl mask systemd-firstboot.service >/dev/null 2>&1
                echo {uuid.uuid4().hex} > /etc/machine-id
                """,
            )
            ct._mount_overlay([base], agent.session_dir / "vmupper", agent.session_dir / "vmwork", vmroot)
            files = guest_files()
            files["/etc/machine-id"] = uuid.uuid4().hex + "\n"
            _write_files(vmroot, files)
            inner.mkdir(parents=True, exist_ok=True)
            ct._run(["mount", "--bind", str(agent.root), str(inner)])
            tmp = img.with_suffix(".tmp")
            ct._run(
                ["nice", "-n", "5", "mkfs.ext4", "-q", "-F", "-L", "hiveroot", "-d", str(vmroot), str(tmp), IMAGE_SIZE]
            )
            tmp.rename(img)
        finally:
            ct._umount(inner)
            ct._umount(vmroot)
            agent.cleanup()
        _log(f"image ready in {time.monotonic() - t0:.0f}s")
        _prune_images(keep=img)
        return img, kernel


def _prune_images(keep: Path, count: int = 3) -> None:
    """Older images of earlier checkouts go (a running qemu keeps its open file)."""
    images = sorted(ct.cache_root().glob("vm-image-*.ext4"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in images if p != keep][count - 1 :]:
        with contextlib.suppress(OSError):
            old.unlink()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------
# the machines


class Vm(MachineApi):
    """One qemu guest; API modelled on nixos/lib/test-driver's ``Machine``."""

    time_scale = TIME_SCALE

    def __init__(self, img: Path, kernel: Path, name: str = "vm", session_dir: Path | None = None) -> None:
        self.name = name
        self.img, self.kernel = img, kernel
        self.session_dir = session_dir or Path(
            tempfile.mkdtemp(prefix=f"{SESSION_PREFIX}{name}-{os.getpid()}-", dir=ct.SESSION_PARENT)
        )
        self.disk = self.session_dir / "disk.qcow2"
        self.console_log = self.session_dir / "console.log"
        self.port = 0
        self._qemu: subprocess.Popen[bytes] | None = None
        self._console = b""
        self._drain: threading.Thread | None = None
        self.booted = False
        self.boot_count = 0
        self.boot_seconds: list[float] = []
        atexit.register(self.cleanup)

    # -- lifecycle ---------------------------------------------------------
    def start(self, timeout: float = 120) -> None:
        """Boot (no-op when booted) and wait until the guest's systemd finished booting."""
        if self.booted:
            return
        t0 = time.monotonic()
        if not self.disk.exists():
            ct._run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(self.img), str(self.disk)])
        self.port = _free_port()
        argv = [
            "qemu-system-x86_64",
            "-nodefaults",
            "-no-user-config",
            "-machine", "q35",
            "-accel", "tcg,thread=multi",
            "-smp", "1",
            "-m", str(MEMORY_MIB),
            "-display", "none",
            "-serial", "stdio",
            "-no-reboot",
            "-kernel", str(self.kernel),
            "-append", APPEND,
            "-drive", f"file={self.disk},if=none,id=root,format=qcow2",
            "-device", "nvme,drive=root,serial=hiveroot",
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:{AGENT_PORT}",
            "-device", "virtio-net-pci,netdev=n0",
        ]  # fmt: skip
        self._console_file = open(self.console_log, "ab")  # noqa: SIM115 - the drain thread's, closed when qemu ends
        self._console_file.write(f"\n===== boot {self.boot_count} =====\n".encode())
        self._console = b""
        self._qemu = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=functools.partial(die_with_parent, os.getpid()),
        )
        self._drain = threading.Thread(target=self._drain_console, args=(self._qemu,), daemon=True)
        self._drain.start()
        deadline = time.monotonic() + self.scaled(timeout)
        while True:  # the guest agent answers: userspace is up
            if self._qemu.poll() is not None:
                raise MachineError(f"qemu exited ({self._qemu.returncode}) during boot:\n{self.console_tail()}")
            try:
                status, _, _ = self._request("true", 30)
                if status == 0:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise MachineError(
                    f"{self.name}: guest agent not up within {self.scaled(timeout):g}s\n{self.console_tail()}"
                )
            self._pause(0.5)
        self.booted = True
        self.boot_count += 1
        status, out, _ = self._request("systemctl is-system-running --wait", max(1.0, deadline - time.monotonic()))
        self.boot_seconds.append(time.monotonic() - t0)
        _log(f"{self.name}: booted ({out.strip()}) in {self.boot_seconds[-1]:.1f}s, agent on 127.0.0.1:{self.port}")
        if out.strip() == "degraded":
            _log(f"{self.name}: failed units: {self.succeed('systemctl --failed --no-legend').strip()}")

    def _drain_console(self, qemu: subprocess.Popen[bytes]) -> None:
        assert qemu.stdout is not None
        while chunk := os.read(qemu.stdout.fileno(), 65536):
            self._console = (self._console + chunk)[-200_000:]
            self._console_file.write(chunk)
            self._console_file.flush()
        self._console_file.close()

    def console_tail(self, n: int = 4000) -> str:
        return self._console[-n:].decode("utf-8", "replace")

    def _wait_exit(self, timeout: float) -> bool:
        if self._qemu is None:
            return True
        try:
            self._qemu.wait(timeout=self.scaled(timeout))
        except subprocess.TimeoutExpired:
            return False
        return True

    def _stopped(self) -> None:
        if self._qemu is not None and self._qemu.poll() is None:
            self._qemu.kill()
            self._qemu.wait()
        if self._drain is not None:
            self._drain.join(timeout=10)
        self._qemu = None
        self.booted = False

    def shutdown(self, timeout: float = 60) -> None:
        """Power off cleanly and wait for qemu to exit."""
        if not self.booted:
            return
        self._request("systemctl poweroff --no-block", 30)
        if not self._wait_exit(timeout):
            _log(f"{self.name}: poweroff did not finish; killing qemu")
        self._stopped()

    def crash(self) -> None:
        """A sudden power loss: qemu killed; the disk keeps what reached it."""
        self._stopped()

    def reboot(self, timeout: float = 120) -> None:
        """Reboot the guest (a real kernel reboot; qemu, run with -no-reboot, starts again)."""
        if self.booted:
            with contextlib.suppress(OSError):
                self._request("systemctl reboot --no-block", 30)
            if not self._wait_exit(timeout):
                raise MachineError(f"{self.name}: reboot did not stop the guest\n{self.console_tail()}")
            self._stopped()
        self.start(timeout=timeout)

    def cleanup(self) -> None:
        """Stop qemu and remove the session dir (the image is untouched)."""
        self._stopped()
        ct._rmtree(self.session_dir)

    # -- commands ----------------------------------------------------------
    def _request(self, command: str, timeout: float | None, machine: str | None = None) -> tuple[int, str, str]:
        """(status, stdout, stderr) of ``command`` run by the guest agent; OSError when it cannot be asked."""
        request = {"cmd": command, "timeout": timeout, "machine": machine}
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as conn:
            conn.settimeout(None if timeout is None else timeout + 60)
            conn.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(1 << 20)
                if not chunk:
                    raise ConnectionError(f"the guest agent closed the connection ({len(data)} bytes read)")
                data += chunk
        reply = json.loads(data)
        return int(reply["status"]), reply["stdout"], reply["stderr"]

    def run_in(self, command: str, timeout: float | None = 900, machine: str | None = None) -> tuple[int, str]:
        """(status, stdout) of a command in the guest (or its container ``machine``); stderr
        kept in ``last_stderr``. A lost connection (the guest going down) reads as status 255."""
        self.start()
        scaled = None if timeout is None else self.scaled(timeout)
        try:
            status, out, self.last_stderr = self._request(command, scaled, machine)
        except OSError as e:
            if self._qemu is None or self._qemu.poll() is not None:
                raise MachineError(f"{self.name} is not running:\n{self.console_tail()}") from e
            status, out, self.last_stderr = 255, "", f"[driver] {e}"
        return status, out

    def execute(
        self, command: str, check_return: bool = True, check_output: bool = True, timeout: float | None = 900
    ) -> tuple[int, str]:
        """Run ``command`` with bash as root in the guest; (exit status, stdout)."""
        status, out = self.run_in(command, timeout)
        return (status if check_return else -1), (out if check_output else "")


class GuestContainer(MachineApi):
    """The ``machine`` API for the nspawn container ``name`` inside the VM ``vm``: commands run
    in it as root; ``reboot()`` reboots the container (nspawn exits 133 and its unit starts it
    again; its root on the guest's disk survives, as on a real host); with ``whole_vm`` it
    reboots the VM itself (a kernel reboot, the container started again by its unit)."""

    def __init__(self, vm: Vm, name: str = CONTAINER, whole_vm: bool = False) -> None:
        self.vm = vm
        self.name = name
        self.whole_vm = whole_vm
        self.unit = f"hive-container@{name}.service"
        self.time_scale = vm.time_scale

    def execute(
        self, command: str, check_return: bool = True, check_output: bool = True, timeout: float | None = 900
    ) -> tuple[int, str]:
        status, out = self.vm.run_in(command, timeout, machine=self.name)
        self.last_stderr = self.vm.last_stderr
        return (status if check_return else -1), (out if check_output else "")

    def start(self, timeout: float = 300) -> None:
        """The VM booted, the container's unit active (its systemd reported ready), its boot done."""
        self.vm.start()
        self.vm.succeed(f"systemctl start {self.unit}", timeout=timeout)
        self.vm.wait_for_unit(self.unit, timeout=timeout)
        self.wait_until_succeeds("systemctl is-system-running --wait | grep -Eqx 'running|degraded'", timeout=timeout)

    def shutdown(self, timeout: float = 120) -> None:
        self.vm.succeed(f"systemctl stop {self.unit}", timeout=timeout)

    def reboot(self, timeout: float = 300) -> None:
        if self.whole_vm:
            self.vm.reboot(timeout=timeout)
            self.start(timeout=timeout)
            return
        old = self.vm.succeed(f"systemctl show -P MainPID {self.unit}").strip()
        self.execute("systemctl reboot --no-block", timeout=30)
        self.vm.wait_until_succeeds(
            f'pid=$(systemctl show -P MainPID {self.unit}); [ "$pid" != 0 ] && [ "$pid" != {old} ]'
            f" && systemctl is-active -q {self.unit}",
            timeout=timeout,
        )
        self.start(timeout=timeout)


def make_hive_vm(name: str = "vm") -> Vm:
    """The image for this checkout (built or reused) and a VM on it; not booted yet."""
    t0 = time.monotonic()
    build = Path(tempfile.mkdtemp(prefix=f"{SESSION_PREFIX}wheel-{os.getpid()}-", dir=ct.SESSION_PARENT))
    try:
        img, kernel = image(ct.build_project_wheel(build))
    finally:
        ct._rmtree(build)
    vm = Vm(img, kernel, name=name)
    _log(f"{name}: image {img.name} ready in {time.monotonic() - t0:.1f}s")
    return vm
