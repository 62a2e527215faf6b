"""The Host interface and the Invocation it runs. Both know nothing of workloads.

An `Invocation` is pure data: argv, environment, files to write before and to collect after,
and how long it should take. Paths of its files are relative to the step's work directory,
which the host chooses (a private directory here; a directory inside a pod later), so the same
invocation is what `--dry-run` prints and what runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from howfast.cancel import NEVER, CancelToken
from howfast.model import JSONValue

if TYPE_CHECKING:  # annotations only: a dry run reads no machine
    from howfast.machine.devices import RoleDevice
    from howfast.machine.memory import MemoryBasis
    from howfast.machine.podread import ServerReading


@dataclass(frozen=True)
class Invocation:
    """One tool run, fully described before it starts."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    # Credentials (PGPASSWORD...): given to the tool, never printed, stored or compared.
    secret_env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    dirs: tuple[str, ...] = ()  # directories to create in the work directory first
    inputs: Mapping[str, str] = field(default_factory=dict)  # file -> text, written first
    outputs: tuple[str, ...] = ()  # glob patterns of files to collect afterwards
    expected_s: float | None = None
    timeout_s: float | None = None

    @property
    def program(self) -> str:
        return PurePath(self.argv[0]).name

    def document(self) -> dict[str, JSONValue]:
        """What `--dry-run --json` prints; never the secret environment."""
        doc: dict[str, JSONValue] = {"argv": list(self.argv), "env": dict(self.env)}
        if self.secret_env:
            doc["secret_env"] = sorted(self.secret_env)  # names only
        if self.inputs:
            doc["inputs"] = dict(self.inputs)
        if self.outputs:
            doc["outputs"] = list(self.outputs)
        if self.expected_s is not None:
            doc["expected_s"] = self.expected_s
        return doc


@dataclass
class ToolResult:
    returncode: int
    stdout: str
    stderr: str
    # Collected output files: the name relative to the work directory -> a local path.
    files: dict[str, Path] = field(default_factory=dict)


class ServerCounters(ABC):
    """The server container's own I/O and CPU counters, read on demand."""

    version: str  # cgroup "v1" or "v2"
    cgroup: str  # the cgroup's path, as the container's /proc/self/cgroup says it
    source: str  # where the figures come from, as a record says it
    note: str | None = None  # what they miss

    @abstractmethod
    def read(self) -> ServerReading: ...

    @abstractmethod
    def device_number(self, device: str) -> str | None:
        """MAJ:MIN of a device named as /proc/diskstats names it."""


LineHandler = Callable[[str], None]
StartHandler = Callable[[int], None]


class Host(ABC):
    """Runs invocations and answers facts about the machine the server runs on."""

    name: str
    # The tools' files can be read here while they run (a live view from pgbench's log).
    follows_files: bool = False

    @abstractmethod
    def run(
        self,
        invocation: Invocation,
        work_dir: Path,
        *,
        cancel: CancelToken = NEVER,
        on_line: LineHandler | None = None,
        on_start: StartHandler | None = None,
    ) -> ToolResult:
        """Run to completion: write the inputs under `work_dir`, feed stderr lines to
        `on_line`, collect the outputs. On cancellation or any exception the tool is stopped
        before this returns or raises; cancellation raises Aborted."""

    @abstractmethod
    def program(self, name: str) -> str | None:
        """Where a tool is on this host, or None when it is not installed."""

    @abstractmethod
    def cores(self) -> int:
        """CPU cores available to the tools (pgbench's threads)."""

    @abstractmethod
    def server_memory(self, cap_bytes: int | None) -> MemoryBasis | str:
        """The memory the server can use (a cgroup cap counts), or why it cannot be known."""

    @abstractmethod
    def role_devices(self, paths: Mapping[str, Path]) -> list[RoleDevice]:
        """The block device behind each storage role's path; [] when not visible."""

    @abstractmethod
    def device_sectors_read(self, device: str) -> int | None:
        """The device's sectors-read counter, for before/after differences."""

    @abstractmethod
    def read_proc(self, *names: str) -> dict[str, str]:
        """Files of /proc on the machine the server runs on ("diskstats", "stat",
        "meminfo"), read together: name -> text. Calls made at the same moment may share
        one reading (the samplers of a tick, on a pod: one exec); device_sectors_read always
        reads anew. Raises OSError or HowfastError when a file cannot be read."""

    @abstractmethod
    def proc_source(self, name: str) -> str:
        """Where read_proc reads a file, as a record says it ("/proc/diskstats")."""

    def process_cpu_note(self) -> str | None:
        """None when the PIDs given to `on_start` are processes whose CPU /proc/PID/stat
        shows here; else why the load generator's CPU is not sampled."""
        return None

    def server_counters(self) -> ServerCounters | None:
        """The server's own cgroup and processes, read through this host (a pod's server
        container); None where the target reads them itself (HasLocalServer.server_io) or
        cannot."""
        return None

    @abstractmethod
    def drop_caches(self) -> str | None:
        """Write dirty pages out and drop the page cache; None when done, else why not."""

    @abstractmethod
    def free_bytes(self, directory: Path) -> int | None:
        """Bytes an unprivileged user may still write there; None when the filesystem does
        not say (ramfs...)."""

    @abstractmethod
    def fstype(self, path: Path) -> str | None: ...

    @abstractmethod
    def direct_io_refused(self, directory: Path) -> bool:
        """Whether the filesystem refuses O_DIRECT (tried with a file of one block)."""

    @abstractmethod
    def same_filesystem(self, a: Path, b: Path) -> bool: ...

    @abstractmethod
    def remove_file(self, path: Path) -> None:
        """Remove a file a tool left on the storage under test; absent is fine."""
