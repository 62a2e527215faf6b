"""What the cluster changes on the host, recorded before `up` and put back by `down`.

- sysctls the kubelet sets (vm.overcommit_memory, kernel.panic, ...);
- iptables chains: kube-proxy's KUBE-* chains (and any the kubelet makes) go, with the rules
  that jump to them (the pod network's own, its bridges and routes: podnet.py);
- host paths hard-coded in containerd, its shims, CNI and the kubelet (/run/containerd, ...);
- the top-level kubepods cgroups the kubelet makes in each hierarchy, and the second node's
  cgroup root (made by `up` itself, see make_cgroup_root).
Every value lives in the state file, so that a later session can restore it after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from tests.k8s.lab import config
from tests.k8s.lab.proc import log, run

CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBE_CGROUPS = ("kubepods", "kubepods.slice")
IPTABLES = ("iptables", "ip6tables")
IPTABLES_TABLES = ("filter", "nat", "mangle")


def cgroup_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


def cgroup_hierarchies() -> list[Path]:
    """The mount points of each cgroup hierarchy (v1: one per controller set; v2: one)."""
    if cgroup_v2():
        return [CGROUP_ROOT]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        # v1 controllers, plus the v2 tree a hybrid host mounts at /sys/fs/cgroup/unified
        if right.split(" ", 1)[0] in ("cgroup", "cgroup2"):
            found.append(Path(left.split()[4]))
    return sorted(set(found))


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    values = {}
    for name in config.WATCHED_SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text().strip()
    return values


def restore_sysctls(saved: dict[str, str]) -> None:
    for name, value in saved.items():
        path = _sysctl_path(name)
        try:
            if path.read_text().strip() != value:
                path.write_text(value + "\n")
                log(f"sysctl {name} restored to {value}")
        except OSError as exc:
            log(f"could not restore sysctl {name}={value}: {exc}")


def iptables_chains() -> dict[str, dict[str, list[str]]]:
    chains: dict[str, dict[str, list[str]]] = {}
    for tool in IPTABLES:
        if shutil.which(tool) is None:
            continue
        chains[tool] = {}
        for table in IPTABLES_TABLES:
            proc = run([tool, "-w", "5", "-t", table, "-S"], check=False)
            if proc.returncode == 0:
                chains[tool][table] = [
                    ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("-N ")
                ]
    return chains


def restore_iptables(before: dict[str, dict[str, list[str]]]) -> None:
    """Remove the KUBE-* chains (and the rules jumping to them) that were not there before."""
    now = iptables_chains()
    for tool, tables in now.items():
        for table, chains in tables.items():
            old = set(before.get(tool, {}).get(table, []))
            new = [c for c in chains if c.startswith("KUBE-") and c not in old]
            if not new:
                continue
            rules = run([tool, "-w", "5", "-t", table, "-S"], check=False).stdout.splitlines()
            for rule in rules:
                words = shlex.split(rule)  # kube-proxy's rules carry quoted comments
                if words[:1] == ["-A"] and "-j" in words and words[words.index("-j") + 1] in new:
                    run([tool, "-w", "5", "-t", table, "-D", *words[1:]], check=False)
            for chain in new:
                run([tool, "-w", "5", "-t", table, "-F", chain], check=False)
            for chain in new:
                run([tool, "-w", "5", "-t", table, "-X", chain], check=False)
            log(f"{tool} -t {table}: removed chains {', '.join(new)}")


def absent_paths() -> list[str]:
    return [p for p in config.HOST_PATHS_CREATED if not os.path.lexists(p)]


def remove_created_paths(absent_before: list[str]) -> None:
    for p in absent_before:
        path = Path(p)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            if any(mount_points_under(path)):
                log(f"not removing {path}: something is still mounted there")
                continue
            shutil.rmtree(path, ignore_errors=True)


def kube_cgroups() -> list[str]:
    return [
        str(h / name) for h in cgroup_hierarchies() for name in KUBE_CGROUPS if (h / name).is_dir()
    ]


def cgroup_pids(top: Path) -> list[int]:
    pids: list[int] = []
    for dirpath, _dirs, files in os.walk(top):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError):
                text = (Path(dirpath) / "cgroup.procs").read_text()
                pids += [int(x) for x in text.split()]
    return pids


def remove_cgroup_tree(top: Path) -> bool:
    """rmdir a cgroup tree, deepest first; True when it is gone."""
    for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -len(t[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)
    return not top.exists()


def cgroup_root_dirs(name: str) -> list[str]:
    """Where a cgroup root named `name` lives: one directory in each hierarchy."""
    return [str(h / name) for h in cgroup_hierarchies()]


def make_cgroup_root(name: str) -> None:
    """Make /NAME in every cgroup hierarchy, as a kubelet's cgroupRoot (the kubelet refuses a
    root that is missing in any hierarchy, and never creates it).

    v1: a new cpuset has no CPUs and no memory nodes, and no task can join it until both are
    set: they are copied from the hierarchy's root. v2 (and the unified tree of a hybrid host):
    the controllers the root hands down are enabled for the kubelet's children."""
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / name
        top.mkdir()
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / knob).exists() and (top / knob).exists():
                (top / knob).write_text((hierarchy / knob).read_text())
        subtree = top / "cgroup.subtree_control"
        if subtree.exists():
            for controller in (top / "cgroup.controllers").read_text().split():
                try:
                    subtree.write_text(f"+{controller}\n")
                except OSError as exc:  # e.g. a controller the host keeps to itself
                    log(f"cgroup {top}: cannot enable {controller} for the kubelet: {exc}")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def mount_points_under(root: Path) -> list[Path]:
    """Mount points at or below `root`, deepest first."""
    prefix = str(root).rstrip("/")
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == prefix or point.startswith(prefix + "/"):
            found.append(point)
    return [Path(p) for p in sorted(set(found), key=lambda p: (-p.count("/"), p))]


def unmount_all_under(root: Path) -> list[Path]:
    """Unmount everything below `root` (deepest first, lazily if busy); return what is left."""
    for _ in range(3):
        points = mount_points_under(root)
        if not points:
            return []
        for point in points:
            if run(["umount", point], check=False).returncode != 0:
                run(["umount", "-l", point], check=False)
    return mount_points_under(root)


def snapshot() -> dict[str, Any]:
    return {
        "sysctls": read_sysctls(),
        "iptables": iptables_chains(),
        "absent_paths": absent_paths(),
        "kube_cgroups_before": kube_cgroups(),
        "cgroup_v2": cgroup_v2(),
    }
