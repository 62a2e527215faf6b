"""This machine's registry of what each howfast process owns, read by `howfast cleanup`.

Names and processes point at most of what a killed run leaves, but not at all of it: a
cluster whose server was down (a restart event) when howfast was killed, a standby half
copied into a `--standby-dir`, the shared memory of a server a failover killed. So each
howfast process writes, before it makes each of these (or at once, for what the system
names: a server's shared memory), one line in a file of its own here:

    ~/.local/state/howfast/owned/HOST-PID-TICKS.jsonl   ($XDG_STATE_HOME/howfast/owned)

The first line is the process (host, boot id, PID and its start time: store/liveness.py, so
a PID reused by another process is told apart); each next line one thing it owns: a
directory (a cluster, a standby, a WAL directory), a cgroup, a server's System V segment or
`/dev/shm/PostgreSQL.*` file, or that a thing is no longer its (a cluster kept with --keep).
It is on disk, not in /run: after a reboot the clusters are still there, and the boot id
says their howfast is gone. A process that ends with nothing of its own left removes its
file; `howfast cleanup` removes the file of one that is gone once nothing it names is left.
Best effort: a file that cannot be written loses only this way of finding things.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from howfast.machine import packetfilter
from howfast.model import JSONValue
from howfast.store import liveness

DSM_PREFIX = "/dev/shm/PostgreSQL."


def registry_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or ""
    base = Path(state) if state.startswith("/") else Path(env.get("HOME") or "/") / ".local/state"
    return base / "howfast" / "owned"


@dataclass(frozen=True)
class Owned:
    """One thing a howfast process owns. `kind`: directory, cgroup, sysv, dsm, packet filter
    (an iptables chain of howfast's: its name in `path`)."""

    kind: str
    path: str = ""  # a directory's, a cgroup's, a dsm file's; a sysv segment's: its shmid
    role: str = ""  # a directory's: cluster, standby, wal
    shmid: int | None = None
    key: int | None = None
    postmaster: int | None = None  # the server that made a segment, and its start ticks
    ticks: int | None = None
    data_dir: str = ""  # that server's data directory


@dataclass(frozen=True)
class Record:
    """One howfast process's file: who wrote it and what it owns (forgotten ones left out)."""

    path: str
    writer: liveness.Writer | None
    items: tuple[Owned, ...]


# -- pure parsers --------------------------------------------------------------------------
def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _owned(doc: Mapping[str, object]) -> Owned | None:
    text = {k: v for k, v in doc.items() if isinstance(v, str)}
    if "directory" in text:
        return Owned("directory", text["directory"], role=text.get("role", ""))
    if "cgroup" in text:
        return Owned("cgroup", text["cgroup"], data_dir=text.get("data_dir", ""))
    if "iptables_chain" in text and packetfilter.is_ours(text["iptables_chain"]):
        return Owned("packet filter", text["iptables_chain"])
    postmaster, ticks = _int(doc.get("postmaster")), _int(doc.get("ticks"))
    data_dir = text.get("data_dir", "")
    dsm = text.get("dsm", "")
    if dsm.startswith(DSM_PREFIX) and "/" not in dsm[len(DSM_PREFIX) :]:
        return Owned("dsm", dsm, postmaster=postmaster, ticks=ticks, data_dir=data_dir)
    shmid, key = _int(doc.get("sysv")), _int(doc.get("key"))
    if shmid is not None and key is not None:
        return Owned("sysv", str(shmid), shmid=shmid, key=key, postmaster=postmaster,
                     ticks=ticks, data_dir=data_dir)  # fmt: skip
    return None


def parse_record(text: str, path: str = "") -> Record:
    """A registry file: its first line the writer, each next one a thing owned or forgotten.
    A line cut short (its process killed while writing it) or not understood is skipped."""
    writer: liveness.Writer | None = None
    items: list[Owned] = []
    forgotten: set[str] = set()
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if "writer" in doc:
            writer = writer or liveness.Writer.from_document(doc["writer"])
        elif isinstance(doc.get("forget"), str):
            forgotten.add(doc["forget"])
        elif (item := _owned(doc)) is not None:
            items.append(item)
    kept = tuple(dict.fromkeys(i for i in items if i.path not in forgotten))
    return Record(path, writer, kept)


def parse_shm_line(pid_file: str) -> tuple[int, int] | None:
    """(key, shmid) of the System V segment a server made, from its postmaster.pid: the 7th
    line, "KEY SHMID" (docs: storage-file-layout); None when there is none (0 or absent)."""
    lines = pid_file.splitlines()
    if len(lines) < 7:
        return None
    fields = lines[6].split()
    try:
        key, shmid = int(fields[0]), int(fields[1])
    except (IndexError, ValueError):
        return None
    return (key, shmid) if key > 0 and shmid >= 0 else None


def parse_dsm_maps(maps: str) -> list[str]:
    """The /dev/shm/PostgreSQL.* files a process has mapped, from its /proc/PID/maps."""
    found = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5].removesuffix(" (deleted)") if len(fields) == 6 else ""
        if path.startswith(DSM_PREFIX) and "/" not in path[len(DSM_PREFIX) :]:
            found.append(path)
    return sorted(set(found))


def file_name(writer: liveness.Writer) -> str:
    """HOST-PID-TICKS.jsonl: a home shared by several machines holds each one's apart."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", writer.host)[:64] or "host"
    return f"{host}-{writer.pid}-{writer.start_ticks}.jsonl"


# -- this process's file -------------------------------------------------------------------
class _Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.path: Path | None = None
        self.items: list[Owned] = []
        self.forgotten: set[str] = set()

    def write(self, doc: dict[str, JSONValue], item: Owned | None) -> None:
        with self.lock:
            try:
                if self.path is None:
                    me = liveness.this_process()
                    directory = registry_dir()
                    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                    path = directory / file_name(me)
                    self._append(path, {"writer": me.document()})
                    self.path = path
                    atexit.register(tidy)
                self._append(self.path, doc)
            except OSError:
                return
            if item is not None:
                self.items.append(item)

    @staticmethod
    def _append(path: Path, doc: Mapping[str, JSONValue]) -> None:
        # one write of one line, appended: the lines of two threads never mix
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (json.dumps(doc) + "\n").encode())
        finally:
            os.close(fd)


_registry = _Registry()


def own_directory(path: Path, role: str) -> None:
    """Before `path` is made: it is this run's (a cluster, a standby's root, a WAL cluster)."""
    where = str(Path(path).absolute())
    _registry.write({"directory": where, "role": role}, Owned("directory", where, role))


def own_cgroup(path: Path, data_dir: Path | None = None) -> None:
    """A cgroup this run made (its owner lock is held meanwhile: machine/cgroup.py), and the
    data directory of the server that runs in it, if any."""
    doc: dict[str, JSONValue] = {"cgroup": str(path)}
    if data_dir is not None:
        doc["data_dir"] = str(data_dir)
    _registry.write(doc, Owned("cgroup", str(path)))


def own_packet_filter(chain: str) -> None:
    """Before it is made: an iptables chain of howfast's (a `partition` event's cut)."""
    _registry.write({"iptables_chain": chain}, Owned("packet filter", chain))


def forget(path: Path) -> None:
    """`path` outlives this run on purpose (a cluster kept with --keep)."""
    _registry.write({"forget": str(Path(path).absolute())}, None)
    with _registry.lock:
        _registry.forgotten.add(str(Path(path).absolute()))


def own_server_memory(pid: int, data_dir: Path, proc: Path = liveness.PROC) -> None:
    """The shared memory of the server `pid` just started on `data_dir`: its System V
    segment (from postmaster.pid) and the /dev/shm/PostgreSQL.* files it has mapped. A
    server that shuts down removes them; one that is killed (a failover, a crash, SIGKILL)
    leaves them, and `howfast cleanup` then removes them once nothing is attached."""
    ticks = liveness.process_start_ticks(pid, proc)
    server: dict[str, JSONValue] = {"postmaster": pid, "ticks": ticks, "data_dir": str(data_dir)}
    with contextlib.suppress(OSError):
        found = parse_shm_line((data_dir / "postmaster.pid").read_text())
        if found is not None:
            key, shmid = found
            _registry.write({"sysv": shmid, "key": key, **server},
                            Owned("sysv", str(shmid), shmid=shmid, key=key, postmaster=pid,
                                  ticks=ticks, data_dir=str(data_dir)))  # fmt: skip
    with contextlib.suppress(OSError):
        for path in parse_dsm_maps((proc / str(pid) / "maps").read_text()):
            _registry.write({"dsm": path, **server},
                            Owned("dsm", path, postmaster=pid, ticks=ticks,
                                  data_dir=str(data_dir)))  # fmt: skip


def server_memory(data_dir: Path) -> list[Owned]:
    """The System V segments and /dev/shm/PostgreSQL.* files this process recorded for the
    servers it started on `data_dir` (own_server_memory), as recorded: read after a server
    was killed, when its postmaster.pid no longer says (a postmaster started there since
    rewrites it)."""
    where = str(data_dir)
    with _registry.lock:
        items = list(_registry.items)
    return [i for i in dict.fromkeys(items) if i.kind in ("sysv", "dsm") and i.data_dir == where]


def exists(item: Owned, sysv_ids: Iterable[int] | None = None) -> bool:
    """Whether a thing owned is still there (a segment by its id alone: the caller checks
    that it is the same one)."""
    if item.kind == "sysv":
        ids = set(sysv_ids) if sysv_ids is not None else set(sysv_segment_ids())
        return item.shmid in ids
    if item.kind == "packet filter":
        return packetfilter.PacketFilter().chain_exists(item.path)
    return os.path.lexists(item.path)


def sysv_segment_ids(read: Callable[[], str] | None = None) -> list[int]:
    try:
        text = read() if read else (liveness.PROC / "sysvipc/shm").read_text()
    except OSError:
        return []
    ids = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 1 and fields[1].isdigit():
            ids.append(int(fields[1]))
    return ids


def tidy() -> None:
    """At exit: this process's file goes when nothing it owns is left (a run taken down
    whole). What a failed take-down left stays named, for `howfast cleanup`."""
    with _registry.lock:
        path, items, forgotten = _registry.path, list(_registry.items), set(_registry.forgotten)
    if path is None:
        return
    ids = sysv_segment_ids()
    if not any(exists(i, ids) for i in items if i.path not in forgotten):
        with contextlib.suppress(OSError):
            path.unlink()
