"""A pod as a host: tools run by exec in one of the pod's containers (never through a
port-forward from here), and facts come from the pod, its node and its volumes.

    host = PodHost(description, api)         # a frozen PodDescription; api: the cluster's exec
    host.run(invocation, work_dir)           # inputs written in the pod first, outputs back

The description says everything the host needs of the pod (its containers, node, mounts):
any Kubernetes-based target builds one (targets/k8s/facts.py's pod_description), for a pod
howfast created or not; nothing here knows howfast's own manifests.

An invocation's work directory is a directory in the pod's memory-backed `work` volume (never
the storage under test), named after the local one; the files it collects come back through
the API (tar, base64) into the local work directory, where the parsers read them. The password
is never sent: the tools container has PGPASSWORD from the run's Secret, so an invocation's
secret environment stays here. Cancellation interrupts the tool by its PID in the pod (SIGINT,
then SIGKILL), as LocalHost does here.
"""

from __future__ import annotations

import base64
import contextlib
import io
import shlex
import shutil
import tarfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from howfast.cancel import NEVER, CancelToken
from howfast.diskcounters import parse_diskstats
from howfast.errors import Aborted, HowfastError
from howfast.hosts.base import (
    Host,
    Invocation,
    LineHandler,
    ServerCounters,
    StartHandler,
    ToolResult,
)
from howfast.machine import podread
from howfast.machine.devices import (
    RoleDevice,
    diskstats_numbers,
    parse_block_links,
    roles_from_mounts,
)
from howfast.machine.fsinfo import mount_for, parse_mountinfo
from howfast.machine.memory import MemoryBasis
from howfast.machine.podread import ServerReading

PID_FILE = ".howfast-pid"
STOP_GRACE_S = 5.0
EXEC_TIMEOUT_S = 10.0  # a sampler's reading: never long enough to hold a step up
# The node's /proc files the samplers read each tick (disk counters, CPU, memory): one exec
# reads them all, shared by the samplers whose ticks fall within PROC_SHARE_S of it.
NODE_PROC = ("diskstats", "stat", "meminfo")
PROC_SHARE_S = 0.25
SECRET_NAMES = {"PGPASSWORD"}  # given to the tools by the container, from the Secret
# What a tool's work directory that could not be made (run_script) says and exits with
SETUP_FAILED = "howfast: the work directory could not be prepared"
SETUP_FAILED_STATUS = 125


@dataclass(frozen=True)
class NodeFacts:
    """The node a pod runs on, as far as known (None: not scheduled yet, or not readable)."""

    name: str | None = None
    cores: int | None = None  # allocatable CPU, in whole cores
    memory_bytes: int | None = None  # allocatable memory


@dataclass(frozen=True)
class PodDescription:
    """What a PodHost needs to know of a pod. Frozen: built once the pod is known (before it
    is scheduled, for a dry run, with the node unknown)."""

    context: str | None  # the kubeconfig context (None: its current one)
    namespace: str
    pod: str
    tools_container: str  # where tools run, unless program_containers names another
    server_container: str | None  # PostgreSQL's; None: a pod without a server (a probe)
    data_dir: str  # PostgreSQL's data directory in server_container (finds its processes)
    work_dir: str  # a memory-backed volume for the tools' work directories (never under test)
    volume_root: str  # where the volumes under test are mounted
    path_setup: str  # a shell snippet that puts PostgreSQL's programs on PATH
    node: NodeFacts = NodeFacts()
    memory_limit_bytes: int | None = None  # the server container's limit (--memory)
    program_containers: Mapping[str, str] = field(default_factory=dict)  # fio: its own image
    images: Mapping[str, str] = field(default_factory=dict)  # container -> image


@dataclass
class ExecResult:
    returncode: int
    stdout: str
    stderr: str


class PodExec(Protocol):
    """Exec in a pod's container (targets/k8s/cluster.py's Cluster)."""

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult: ...

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        """A session (the client's WSClient): is_open, update, peek_/read_stdout and _stderr,
        returncode, close."""


def wrapper(path_setup: str) -> str:
    """cd to the work directory, leave the PID where a stop can find it, then become the
    tool (with PostgreSQL's programs on PATH)."""
    return f'd="$1"; shift; cd "$d" || exit 127; echo $$ > {PID_FILE}; {path_setup}; exec env "$@"'


def run_script(directory: PurePosixPath, invocation: Invocation, path_setup: str) -> str:
    """The work directory made and the inputs written (setup_script), then the tool
    (wrapper), in one command: each command costs a round trip through the API server. A
    setup that fails says so on its last line of stderr (SETUP_FAILED) and exits
    SETUP_FAILED_STATUS, before the tool starts."""
    return (
        f"( {setup_script(directory, invocation)}\n) || "
        f"{{ echo {SETUP_FAILED} >&2; exit {SETUP_FAILED_STATUS}; }}\n{wrapper(path_setup)}"
    )


def setup_failure(result: ToolResult) -> str | None:
    """What the setup of run_script said when it failed; None when the tool ran."""
    said = result.stderr.rstrip("\n")
    if result.returncode != SETUP_FAILED_STATUS or not said.endswith(SETUP_FAILED):
        return None
    return said[: -len(SETUP_FAILED)].strip() or f"exit status {SETUP_FAILED_STATUS}"


def pod_work_dir(work_dir: Path, work_root: str) -> PurePosixPath:
    """The pod directory of a local work directory: its last parts, under the work volume."""
    return PurePosixPath(work_root, *work_dir.parts[-3:])


def setup_script(directory: PurePosixPath, invocation: Invocation) -> str:
    """A shell script that makes the work directory and writes the invocation's inputs."""
    q = shlex.quote
    lines = [f"set -e; mkdir -p {q(str(directory))}"]
    for sub in invocation.dirs:
        lines.append(f"mkdir -p {q(str(directory / sub))}")
    for name, text in invocation.inputs.items():
        lines.append(f"printf '%s' {q(text)} > {q(str(directory / name))}")
    return "\n".join(lines)


def collect_script(directory: PurePosixPath, patterns: tuple[str, ...]) -> str:
    """A shell script that prints the files matching `patterns` as a base64 tar."""
    globs = " ".join(_glob_quote(p) for p in patterns)
    return (
        f"cd {shlex.quote(str(directory))} || exit 0; set --; "
        f'for f in {globs}; do [ -f "$f" ] && set -- "$@" "$f"; done; '
        '[ "$#" -eq 0 ] && exit 0; tar cf - -- "$@" | base64'
    )


def collect_and_remove_script(directory: PurePosixPath, patterns: tuple[str, ...]) -> str:
    """collect_script, then the work directory removed, in one command; its exit status is
    the collection's."""
    return (
        f"( {collect_script(directory, patterns)} ); rc=$?; "
        f"rm -rf {shlex.quote(str(directory))}; exit $rc"
    )


def _glob_quote(pattern: str) -> str:
    """Quote a glob pattern for sh, leaving * and ? to expand."""
    return "".join(c if c in "*?" else shlex.quote(c) for c in pattern)


def unpack(text: str, into: Path) -> dict[str, Path]:
    """The base64 tar of collect_script, extracted under `into`: name -> local path."""
    data = base64.b64decode("".join(text.split()))
    if not data:
        return {}
    files: dict[str, Path] = {}
    # Member by member rather than extractall(filter="data"), which Python 3.11 has only from
    # 3.11.4 (Debian 12's python3, in howfast's own image, is 3.11.2): regular files with a
    # relative name that stays under `into`, as collect_script sends; anything else is skipped.
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            name = PurePosixPath(member.name)
            if not member.isfile() or name.is_absolute() or ".." in name.parts:
                continue
            source = archive.extractfile(member)
            if source is None:
                continue
            target = into.joinpath(*name.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with source, target.open("wb") as out:
                shutil.copyfileobj(source, out)
            files[member.name] = target
    return files


def _exec_failure(out: Any) -> str:
    """What a failed exec said, or its exit status when it said nothing (an exec that the
    API server cut, a container that restarted)."""
    said = str(out.stderr or "").strip()
    return said or f"the exec exited with status {out.returncode} and printed nothing"


class PodServerCounters(ServerCounters):
    """The server container's cgroup and processes, one exec per reading. Which cgroup
    version, and so which files, is found at the first reading (an exec that fails there
    turns the sampler off with a warning, never the step)."""

    def __init__(self, host: PodHost, container: str) -> None:
        self.host = host
        self.container = container
        self.version = ""
        self.cgroup = ""
        self.files: dict[str, str] = {}
        self.source = f"the server container's cgroup + /proc/PID/io, {host._where(container)}"

    def _detect(self) -> None:
        out = self.host._exec(["cat", "/proc/self/cgroup"], container=self.container)
        if out.returncode != 0:
            raise HowfastError(f"cannot read the server container's cgroup: {_exec_failure(out)}")
        self.version, self.cgroup = podread.own_cgroup_path(out.stdout)
        v1 = self.version == "v1"
        self.files = dict(podread.CGROUP_V1_FILES) if v1 else podread.cgroup_v2_files("/")
        what = "blkio.throttle, cpuacct" if v1 else "io.stat, cpu.stat"
        self.source = (
            f"cgroup {self.version} of the server container ({what}) + /proc/PID/io, "
            f"{self.host._where(self.container)}"
        )
        if v1:
            self.note = (
                "cgroup v1 charges the kernel's writeback to the root cgroup: cgroup_total is "
                "what the server's processes submitted themselves (fsync, direct I/O); proc "
                "counts the pages they dirtied"
            )

    def read(self) -> ServerReading:
        if not self.version:
            self._detect()
        argv = podread.server_argv(self.files, self.host.pod.data_dir)
        out = self.host._exec(argv, container=self.container, timeout_s=EXEC_TIMEOUT_S)
        if out.returncode != 0:
            raise HowfastError(f"cannot read the server container's counters: {_exec_failure(out)}")
        return podread.parse_server(self.version, self.files, out.stdout)

    def device_number(self, device: str) -> str | None:
        return self.host.device_number(device)


class PodHost(Host):
    name = "pod"

    def __init__(self, pod: PodDescription, api: PodExec) -> None:
        self.pod = pod
        self.api = api
        self._numbers: dict[str, str] | None = None  # device name -> MAJ:MIN, on the node
        self._counters: PodServerCounters | None = None
        self._proc_lock = threading.Lock()
        self._proc_last: tuple[float, dict[str, str]] | None = None  # (when, name -> text)

    # -- where things run --------------------------------------------------------------
    def _container(self, program: str) -> str:
        return self.pod.program_containers.get(program, self.pod.tools_container)

    def _exec(
        self, command: list[str], *, container: str | None = None, timeout_s: float = 60
    ) -> ExecResult:
        pod = self.pod
        return self.api.exec(
            pod.namespace, pod.pod, container or pod.tools_container, command, timeout_s=timeout_s
        )

    def _sh(
        self, script: str, *, container: str | None = None, timeout_s: float = 60
    ) -> ExecResult:
        return self._exec(["/bin/sh", "-c", script], container=container, timeout_s=timeout_s)

    def run(
        self,
        invocation: Invocation,
        work_dir: Path,
        *,
        cancel: CancelToken = NEVER,
        on_line: LineHandler | None = None,
        on_start: StartHandler | None = None,
    ) -> ToolResult:
        """The tool runs in the pod; `on_start` is not called: its PID means nothing here."""
        unknown = set(invocation.secret_env) - SECRET_NAMES
        if unknown:
            raise HowfastError(f"a pod cannot be given {', '.join(sorted(unknown))} safely")
        namespace, pod = self.pod.namespace, self.pod.pod
        container = self._container(invocation.program)
        directory = pod_work_dir(work_dir, self.pod.work_dir)
        env = [f"{k}={v}" for k, v in invocation.env.items()]
        script = run_script(directory, invocation, self.pod.path_setup)
        command = ["/bin/sh", "-c", script, "howfast", str(directory), *env, *invocation.argv]
        removed = False  # the work directory, by the command that collects the files
        try:
            session = self.api.exec_stream(namespace, pod, container, command)
            out: list[str] = []
            err: list[str] = []
            partial = ""
            started = time.monotonic()
            try:
                while session.is_open():
                    session.update(timeout=0.2)
                    if session.peek_stdout():
                        out.append(session.read_stdout())
                    if session.peek_stderr():
                        chunk = session.read_stderr()
                        err.append(chunk)
                        partial += chunk
                        *lines, partial = partial.split("\n")
                        for line in lines:
                            if on_line:
                                on_line(line)
                    if cancel.cancelled:
                        raise Aborted(cancel.reason or "cancelled")
                    timeout = invocation.timeout_s
                    if timeout is not None and time.monotonic() - started > timeout:
                        raise HowfastError(
                            f"{invocation.program} did not finish within {timeout:g} s in pod {pod}"
                        )
                out.append(session.read_stdout() or "")
                rest = session.read_stderr() or ""
                err.append(rest)
                partial += rest
                if partial and on_line:
                    for line in partial.splitlines():
                        on_line(line)
                code = session.returncode
            except BaseException:
                self._stop_tool(directory, container)
                raise
            finally:
                session.close()
            result = ToolResult(int(code if code is not None else -1), "".join(out), "".join(err))
            failed_setup = setup_failure(result)
            if failed_setup is not None:
                raise HowfastError(f"cannot prepare {directory} in pod {pod}: {failed_setup}")
            if invocation.outputs:
                removed = True  # tried: whatever it answers, not again below
                result.files = self._collect(invocation, directory, container, work_dir)
            return result
        finally:
            if not removed:
                with contextlib.suppress(Exception):
                    self._sh(f"rm -rf {shlex.quote(str(directory))}", container=container)

    def _collect(
        self, invocation: Invocation, directory: PurePosixPath, container: str, work_dir: Path
    ) -> dict[str, Path]:
        """The tool's output files, brought back under `work_dir`; its work directory in the
        pod removed by the same command."""
        collected = self._sh(
            collect_and_remove_script(directory, invocation.outputs),
            container=container,
            timeout_s=300,
        )
        if collected.returncode != 0:
            raise HowfastError(
                f"cannot collect {invocation.program}'s files from pod {self.pod.pod}: "
                f"{collected.stderr.strip()}"
            )
        return unpack(collected.stdout, work_dir)

    def _stop_tool(self, directory: PurePosixPath, container: str) -> None:
        """SIGINT, then SIGKILL, to the tool's PID in the pod (the pod may be gone already)."""
        pid_file = shlex.quote(str(directory / PID_FILE))
        script = (
            f'p=$(cat {pid_file} 2>/dev/null) || exit 0; kill -INT "$p" 2>/dev/null || exit 0; '
            f'i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt {int(STOP_GRACE_S * 10)} ]; do '
            'sleep 0.1; i=$((i+1)); done; kill -KILL "$p" 2>/dev/null; exit 0'
        )
        with contextlib.suppress(Exception):
            self._sh(script, container=container, timeout_s=STOP_GRACE_S + 10)

    # -- facts -----------------------------------------------------------------------------
    def program(self, name: str) -> str | None:
        return name  # on the image's PATH (or in /usr/lib/postgresql/N/bin, added to it)

    def cores(self) -> int:
        """pgbench runs in the tools container, which has no CPU limit: the node's cores."""
        return self.pod.node.cores or 1

    def server_memory(self, cap_bytes: int | None) -> MemoryBasis | str:
        limit = self.pod.memory_limit_bytes or cap_bytes
        if limit:
            return MemoryBasis(limit, "--memory")
        node = self.pod.node.memory_bytes
        if node:
            return MemoryBasis(node, "ram")
        return (
            "the memory of a pod without a limit is the node's, unknown until it is scheduled; "
            "give --memory SIZE (the server container's request and limit)"
        )

    def _where(self, container: str) -> str:
        return f"by exec in pod {self.pod.pod} (container {container})"

    def role_devices(self, paths: Mapping[str, Path]) -> list[RoleDevice]:
        """From inside the pod: the mounts of the tools container (the same volumes as the
        server's), the node's /proc/diskstats and /sys/dev/block (devices.roles_from_mounts)."""
        out = self._exec(podread.devices_argv(), timeout_s=EXEC_TIMEOUT_S)
        if out.returncode != 0:
            raise HowfastError(f"cannot read the pod's mounts: {out.stderr.strip()}")
        mountinfo, diskstats, links = podread.parse_devices(out.stdout)
        self._numbers = {name: num for num, name in diskstats_numbers(diskstats).items()}
        found = {role: str(path) for role, path in paths.items()}
        return roles_from_mounts(found, mountinfo, diskstats, parse_block_links(links))

    def device_sectors_read(self, device: str) -> int | None:
        counters = parse_diskstats(self._read_proc_now(["diskstats"])["diskstats"]).get(device)
        return counters.sectors_read if counters else None

    def read_proc(self, *names: str) -> dict[str, str]:
        """The node's /proc files (diskstats, stat and meminfo are not namespaced), by exec
        in the tools container. Samplers that tick together share one exec: a call within
        PROC_SHARE_S of the last one gets that reading (it reads every file of NODE_PROC)."""
        with self._proc_lock:
            now = time.monotonic()
            last = self._proc_last
            if last is not None and now - last[0] < PROC_SHARE_S and set(names) <= set(last[1]):
                return {name: last[1][name] for name in names}
            texts = self._read_proc_now(list(dict.fromkeys([*names, *NODE_PROC])))
            self._proc_last = (now, texts)
            return {name: texts[name] for name in names}

    def _read_proc_now(self, names: list[str]) -> dict[str, str]:
        paths = {f"/proc/{name}": name for name in names}
        out = self._exec(podread.dump_argv(list(paths)), timeout_s=EXEC_TIMEOUT_S)
        found, errors = podread.split_dump(out.stdout)
        missing = [p for p in paths if p not in found]
        if out.returncode != 0 or missing:
            why = errors.get(missing[0], out.stderr.strip()) if missing else out.stderr.strip()
            raise HowfastError(f"cannot read {', '.join(missing) or 'proc'} in the pod: {why}")
        return {name: found[path] for path, name in paths.items()}

    def proc_source(self, name: str) -> str:
        return f"the node's /proc/{name}, {self._where(self.pod.tools_container)}"

    def process_cpu_note(self) -> str | None:
        return (
            "pgbench runs in a pod (the client pod, or with --client same-pod the server pod's "
            "tools container): its CPU by PID is not read from here (the node's CPU shares are)"
        )

    def server_counters(self) -> ServerCounters | None:
        """The postgres container's own cgroup (as runc mounts it: v1 at
        /sys/fs/cgroup/CONTROLLER, v2 in its cgroup namespace) and the server's processes."""
        if self.pod.server_container is None:
            return None
        if self._counters is None:
            self._counters = PodServerCounters(self, self.pod.server_container)
        return self._counters

    def device_number(self, device: str) -> str | None:
        if self._numbers is None:
            text = self.read_proc("diskstats")["diskstats"]
            self._numbers = {name: num for num, name in diskstats_numbers(text).items()}
        return self._numbers.get(device)

    def drop_caches(self) -> str | None:
        return (
            "a pod cannot drop its node's page cache (that needs root on the node, which the "
            "restricted Pod Security Standard forbids)"
        )

    def free_bytes(self, directory: Path) -> int | None:
        out = self._sh(f"stat -f -c '%a %S' {shlex.quote(str(directory))}")
        try:
            available, block = (int(v) for v in out.stdout.split())
        except ValueError:
            return None
        return available * block if out.returncode == 0 else None

    def fstype(self, path: Path) -> str | None:
        """The type of the mount holding `path`, from the container's mountinfo (as this
        machine's is read); `stat -f` only when that cannot be read: it names the
        superblock's magic number, which ext2, ext3 and ext4 share ("ext2/ext3")."""
        out = self._sh("cat /proc/self/mountinfo")
        if out.returncode == 0:
            mount = mount_for(Path(path), parse_mountinfo(out.stdout))
            if mount is not None:
                return mount.fstype
        out = self._sh(f"stat -f -c %T {shlex.quote(str(path))}")
        return (out.stdout.strip() or None) if out.returncode == 0 else None

    def direct_io_refused(self, directory: Path) -> bool:
        probe = shlex.quote(str(directory / ".howfast-direct-io-probe"))
        out = self._sh(
            f"dd if=/dev/zero of={probe} bs=4096 count=1 oflag=direct 2>&1; rc=$?; rm -f {probe}; "
            "exit $rc"
        )
        return out.returncode != 0 and "Invalid argument" in out.stdout + out.stderr

    def same_filesystem(self, a: Path, b: Path) -> bool:
        inside = [str(p).startswith(self.pod.volume_root + "/") for p in (a, b)]
        if not all(inside):
            return False  # a local work directory: not on any volume of the pod
        out = self._sh(f"stat -c %d {shlex.quote(str(a))} {shlex.quote(str(b))}")
        devices = out.stdout.split()
        return out.returncode == 0 and len(devices) == 2 and devices[0] == devices[1]

    def remove_file(self, path: Path) -> None:
        with contextlib.suppress(HowfastError):
            self._sh(f"rm -f {shlex.quote(str(path))}")
