"""Reading many files of a pod in one exec: the scripts that print them, and the pure parsers
of what they print. An exec costs ~0.1 s and a few ms of howfast's CPU (docs/kubernetes.md),
so a sampler's tick reads everything it needs at once.

    argv = dump_argv(["/proc/diskstats", "/proc/stat"])   # one exec in a container
    texts, errors = split_dump(output)           # path -> text; path -> why it was not read
    reading = parse_server(version, files, output)   # the server container's own counters

The output marks each file with a line `\\x1e<status> <path>` (record separator, never in
/proc or /sys text), then its text; status `ok`, or `err` followed by cat's message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from howfast.machine.serverio import parse_blkio_v1, parse_io_stat, parse_proc_io

MARK = "\x1e"

# cat each path given as an argument, each under its own mark line.
DUMP_SCRIPT = (
    'for f do if t=$(cat -- "$f" 2>&1); then s=ok; else s=err; fi; '
    'printf \'\\036%s %s\\n%s\\n\' "$s" "$f" "$t"; done'
)

# What the devices need, besides mountinfo and diskstats: each /sys/dev/block entry as
# "MAJ:MIN PARTITION(0|1) LINK-TARGET" (sysfs is read-only in containers, but readable).
BLOCK_LINKS_SCRIPT = (
    'for l in /sys/dev/block/*; do [ -e "$l" ] || continue; p=0; '
    '[ -e "$l/partition" ] && p=1; printf \'%s %s %s\\n\' "${l##*/}" "$p" "$(readlink "$l")"; '
    "done"
)


def dump_argv(paths: list[str]) -> list[str]:
    return ["/bin/sh", "-c", DUMP_SCRIPT, "sh", *paths]


DEVICE_FILES = ["/proc/self/mountinfo", "/proc/diskstats"]  # /proc/self: cat's own mounts


def devices_argv() -> list[str]:
    """One exec: the container's mounts, the node's diskstats, then the block links."""
    script = DUMP_SCRIPT + "; printf '\\037\\n'; " + BLOCK_LINKS_SCRIPT
    return ["/bin/sh", "-c", script, "sh", *DEVICE_FILES]


def parse_devices(text: str) -> tuple[str, str, str]:
    """devices_argv's output -> (mountinfo, diskstats, block links), each text; raises
    OSError when mountinfo or diskstats could not be read."""
    dumped, _, links = text.partition("\x1f\n")
    found, errors = split_dump(dumped)
    for path in DEVICE_FILES:
        if path not in found:
            raise OSError(f"{path}: {errors.get(path, 'not read')}")
    return found[DEVICE_FILES[0]], found[DEVICE_FILES[1]], links


def split_dump(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The output of DUMP_SCRIPT -> (path -> text, path -> error message)."""
    texts: dict[str, str] = {}
    errors: dict[str, str] = {}
    for chunk in text.split(MARK)[1:]:
        header, _, body = chunk.partition("\n")
        status, _, path = header.partition(" ")
        body = body.removesuffix("\n")
        if status == "ok":
            texts[path] = body
        else:
            errors[path] = body.strip() or "cannot be read"
    return texts, errors


# -- the server container's own cgroup ------------------------------------------------------

CGROUP_V1_FILES = {
    "io_bytes": "/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes",
    "io_ios": "/sys/fs/cgroup/blkio/blkio.throttle.io_serviced",
    "cpu_usage": "/sys/fs/cgroup/cpuacct/cpuacct.usage",
    "cpu_stat": "/sys/fs/cgroup/cpu/cpu.stat",
}


def cgroup_v2_files(path: str) -> dict[str, str]:
    base = PurePosixPath("/sys/fs/cgroup") / path.lstrip("/")
    return {"io_stat": str(base / "io.stat"), "cpu_stat": str(base / "cpu.stat")}


def own_cgroup_path(proc_self_cgroup: str) -> tuple[str, str]:
    """(version, the cgroup path) from /proc/self/cgroup: v2 when the only line is `0::PATH`
    (with a cgroup namespace, as containerd gives, PATH is `/`), else v1 (its blkio path:
    runc mounts the container's own cgroup of each controller at /sys/fs/cgroup/CONTROLLER)."""
    lines = [ln.split(":", 2) for ln in proc_self_cgroup.splitlines() if ln.count(":") >= 2]
    v1 = [ln for ln in lines if ln[0] != "0"]
    if not v1:
        v2 = [ln[2] for ln in lines if ln[0] == "0"]
        return "v2", v2[0] if v2 else "/"
    for _, controllers, path in v1:
        if "blkio" in controllers.split(","):
            return "v1", path
    return "v1", v1[0][2]


def parse_cpu_stat(text: str) -> dict[str, int]:
    """cgroup cpu.stat ('nr_throttled 3' lines) -> name -> value."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


@dataclass(frozen=True)
class ContainerCpu:
    """CPU the container used, and how often its CPU limit (CFS quota) held it back."""

    usage_ns: int | None  # all cores together
    periods: int | None = None  # CFS periods with the container runnable
    throttled_periods: int | None = None
    throttled_ns: int | None = None


def container_cpu(version: str, texts: dict[str, str]) -> ContainerCpu:
    """v1: cpuacct.usage (ns) and cpu.stat (throttled_time in ns); v2: cpu.stat (usec)."""
    stat = parse_cpu_stat(texts.get("cpu_stat", ""))
    if version == "v2":
        usage = stat.get("usage_usec")
        throttled = stat.get("throttled_usec")
        return ContainerCpu(
            usage * 1000 if usage is not None else None,
            stat.get("nr_periods"),
            stat.get("nr_throttled"),
            throttled * 1000 if throttled is not None else None,
        )
    raw = texts.get("cpu_usage", "").strip()
    return ContainerCpu(
        int(raw) if raw.isdigit() else None,
        stat.get("nr_periods"),
        stat.get("nr_throttled"),
        stat.get("throttled_time"),
    )


# The server's processes: the postmaster's PID from postmaster.pid, its children, and each
# one's /proc/PID/io, as "PID" lines followed by the file (the container's own PID namespace).
def processes_script(pgdata: str) -> str:
    # The postmaster's line also carries its start time (postmaster.pid's third line): a
    # server started again, in a pod made again under the same name, is another server.
    # First an "init START" line, the start time of the container's PID 1 (field 22 of
    # /proc/1/stat): a pod made again is another container even before its server runs,
    # while the data volume may still hold the old server's postmaster.pid.
    return (
        "i=$(cat /proc/1/stat 2>/dev/null) && i=${i##*) } && set -- $i && "
        "printf '\\035init %s\\n' \"${20}\"; "
        f"f='{pgdata}/postmaster.pid'; p=$(head -n 1 \"$f\" 2>/dev/null) || exit 0; "
        's=$(sed -n 3p "$f" 2>/dev/null); '
        'for q in "$p" $(cat /proc/"$p"/task/"$p"/children 2>/dev/null); do '
        'printf \'\\035%s %s\\n\' "$q" "$s"; s=; cat /proc/"$q"/io 2>/dev/null; done; exit 0'
    )  # a process gone between the listing and its read is left out, not a failure: without
    # `exit 0` the loop's status is the last cat's, 1 with nothing on stderr, which is how
    # the readings of CloudNativePG instances failed on the lab (short-lived backends)


def parse_processes(text: str) -> tuple[str | None, int | None, dict[int, str]]:
    """processes_script's output -> (the server's identity, postmaster PID, PID ->
    /proc/PID/io text); the postmaster first. The identity is "PID@START" (its start time
    from postmaster.pid; "PID" from a script that did not print it). A process that exited
    between the two reads has empty text: left out."""
    server: str | None = None
    postmaster: int | None = None
    out: dict[int, str] = {}
    for chunk in text.split("\x1d")[1:]:
        head, _, body = chunk.partition("\n")
        words = head.split()
        if not words or not words[0].isdigit():
            continue
        pid = int(words[0])
        if postmaster is None:
            postmaster = pid
            server = "@".join(words[:2])
        if body.strip():
            out[pid] = body
    return server, postmaster, out


def parse_container(text: str) -> str | None:
    """processes_script's output -> the start time of the container's PID 1, or None."""
    for chunk in text.split("\x1d")[1:]:
        words = chunk.partition("\n")[0].split()
        if len(words) == 2 and words[0] == "init" and words[1].isdigit():
            return words[1]
    return None


@dataclass
class ServerReading:
    """One reading of the server container: cgroup I/O per MAJ:MIN, CPU, its processes' I/O."""

    io: dict[str, dict[str, int]] = field(default_factory=dict)
    cpu: ContainerCpu = field(default_factory=lambda: ContainerCpu(None))
    postmaster: int | None = None
    processes: dict[int, dict[str, int]] = field(default_factory=dict)
    server: str | None = None  # "PID@START": another value is another server (parse_processes)
    container: str | None = None  # its PID 1's start time: another value, another container


def server_argv(files: dict[str, str], pgdata: str) -> list[str]:
    """One exec that prints the cgroup files (DUMP_SCRIPT) and then the server's processes."""
    script = DUMP_SCRIPT + "; " + processes_script(pgdata)
    return ["/bin/sh", "-c", script, "sh", *files.values()]


def parse_server(version: str, files: dict[str, str], text: str) -> ServerReading:
    """server_argv's output -> a ServerReading; `files` maps keys (CGROUP_V1_FILES or
    cgroup_v2_files) to the paths that were read. An unreadable cgroup file raises
    OSError with cat's message: the sampler then says why it stopped."""
    dumped, _, procs = text.partition("\x1d")
    found, errors = split_dump(dumped)
    if errors:
        path, why = next(iter(errors.items()))
        raise OSError(f"{path}: {why}")
    texts = {key: found.get(path, "") for key, path in files.items()}
    if version == "v2":
        io = parse_io_stat(texts.get("io_stat", ""))
    else:
        io = parse_blkio_v1(texts.get("io_bytes", ""), texts.get("io_ios", ""))
    processes = "\x1d" + procs if procs else ""
    server, postmaster, raw = parse_processes(processes)
    return ServerReading(
        io=io,
        cpu=container_cpu(version, texts),
        postmaster=postmaster,
        processes={pid: parse_proc_io(body) for pid, body in raw.items()},
        server=server,
        container=parse_container(processes),
    )
