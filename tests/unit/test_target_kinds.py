"""The target kinds' API (targets/kind.py, targets/registry.py): what a command asks of the
kinds of its targets without naming any (options, local install, refusals, targets, probe
targets, fleets, doctor checks, housekeeping), and the targets' capabilities
(targets/capabilities.py). Nothing here contacts a cluster or starts a server: targets are
made, planned and inspected; the one real thing is the cgroup of the housekeeping test."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from howfast.errors import UsageError
from howfast.machine.pgbin import PgInstall
from howfast.plans import parse_plan
from howfast.service.dryrun import plan_document
from howfast.targets import registry
from howfast.targets.base import Target
from howfast.targets.capabilities import (
    AppliesStepSettings,
    HasLocalServer,
    HasServerLog,
    HasStorage,
    Restartable,
    describe_capabilities,
)
from howfast.targets.dsn import DsnTarget
from howfast.targets.emulated.target import EmulatedTarget
from howfast.targets.fleet import FleetMember, LocalFleet
from howfast.targets.k8s.fleet import K8sFleet, K8sFleetMember
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.k8s.target import K8sTarget, K8sVolumeTarget
from howfast.targets.kind import OptionContext, RunShape, TargetOptions
from howfast.targets.kinds.directory import DirectoryOptions
from howfast.targets.local import LocalOptions, LocalTarget
from howfast.targets.path import PathTarget

INSTALL = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")
STEP = '[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nclients = [1]\nduration = "5s"\n'


def options(**kind_options: object) -> TargetOptions:
    return TargetOptions(INSTALL, kind_options=kind_options)


def parse(values: dict[str, str | None], *targets: str, **ctx: object) -> dict[str, object]:
    return registry.parse_kind_options(values, OptionContext("run", targets, **ctx))  # type: ignore[arg-type]


# -- options -----------------------------------------------------------------------------


def test_each_kind_declares_its_options_for_the_commands_that_have_them() -> None:
    run = {(kind.name, o.flag) for kind, o in registry.kind_options("run")}
    probe = {(kind.name, o.flag) for kind, o in registry.kind_options("probe")}
    k8s = {"--namespace", "--kube-context", "--volume-size", "--image", "--fio-image", "--node",
           "--cpu"}  # fmt: skip
    storage = {"--storage-latency", "--storage-iops", "--storage-size"}
    assert run == {("k8s", f) for f in k8s} | {("local", f) for f in storage}
    assert probe == {("k8s", f) for f in k8s}  # probe has no emulated volumes
    for _, option in registry.kind_options("run"):
        assert option.flag == "--" + option.name.replace("_", "-")
        assert option.help and option.metavar


def test_options_given_without_a_target_of_their_kind_are_refused() -> None:
    only = r"^--namespace, --node: for k8s:// and cnpg:// targets only$"
    with pytest.raises(UsageError, match=only):
        parse({"node": "n1", "namespace": "bench"}, "/mnt/a")
    assert parse({}, "/mnt/a") == {"local": DirectoryOptions()}  # a cluster on the directory


def test_the_k8s_kind_parses_its_options_with_the_memory_limit() -> None:
    parsed = parse({"namespace": "bench", "cpu": "500m"}, "k8s://fast", "/mnt/a",
                   memory_bytes=2**30)  # fmt: skip
    kube = parsed["k8s"]
    assert isinstance(kube, K8sOptions)
    assert (kube.namespace, kube.cpu, kube.memory_bytes) == ("bench", "500m", 2**30)
    with pytest.raises(UsageError, match="--cpu '0' must be more than 0"):
        parse({"cpu": "0"}, "k8s://fast")


def test_the_directory_kind_parses_emulated_volumes_from_options_or_the_plan() -> None:
    parsed = parse({"storage_latency": "0,2ms", "storage_iops": "500"}, "/mnt/a")
    storage = parsed["local"]
    assert isinstance(storage, DirectoryOptions)
    assert [v.describe() for v in storage.variants] == ["+0ms 500 IOPS", "+2ms 500 IOPS"]
    assert storage.size_bytes == 4 * 2**30
    plan = parse_plan('[storage]\nlatency = ["1ms"]\nsize = "1GiB"\n' + STEP, source="p.toml")
    from_plan = parse({}, "/mnt/a", plan=plan)["local"]
    assert isinstance(from_plan, DirectoryOptions)
    assert [v.describe() for v in from_plan.variants] == ["+1ms"]
    assert from_plan.size_bytes == 2**30
    sized = parse({"storage_latency": "1ms", "storage_size": "2GiB"}, "/mnt/a", plan=plan)
    assert sized["local"] == DirectoryOptions(from_plan.variants, 2 * 2**30, ("--storage-latency",))
    with pytest.raises(
        UsageError, match=r"need directory targets: postgresql://u:.*@h/db is a"
    ) as e:
        parse({"storage_latency": "1ms"}, "/mnt/a", "postgresql://u:secret@h/db")
    assert "secret" not in str(e.value)
    with pytest.raises(UsageError, match="at most 100ms per I/O"):
        parse({"storage_latency": "101ms"}, "/mnt/a")


# -- what a run needs and refuses -----------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "needs"),
    [
        (["/mnt/a"], "server"),
        (["postgresql://u@h/db"], "client"),
        (["host=h dbname=db"], "client"),
        (["k8s://fast"], "none"),
        (["k8s://fast", "postgresql://u@h/db"], "client"),
        (["k8s://fast", "/mnt/a"], "server"),
    ],
)
def test_the_local_install_a_run_needs_is_the_most_its_kinds_need(
    texts: list[str], needs: str
) -> None:
    assert registry.local_install(texts) == needs


def test_a_kind_refuses_what_it_cannot_do_before_anything_runs() -> None:
    registry.refuse(["/mnt/a", "postgresql://u@h/db"], RunShape(until=True))
    with pytest.raises(UsageError, match="--until is not supported with k8s:// targets"):
        registry.refuse(["/mnt/a", "k8s://fast"], RunShape(until=True))
    registry.refuse(["k8s://fast"], RunShape(fleet=True, dry_run=True))


# -- targets -------------------------------------------------------------------------------


def test_targets_are_made_by_their_kind_in_the_order_given() -> None:
    storage = DirectoryOptions(
        tuple(parse({"storage_latency": "0,1ms"}, "/a")["local"].variants), 2**30
    )  # type: ignore[attr-defined]
    kube = K8sOptions(namespace="bench")
    made = registry.make_targets(
        ["/mnt/a", "postgresql://u@h/db", "k8s://fast", "/mnt/b"],
        TargetOptions(INSTALL, memory_limit=None, kind_options={"local": storage, "k8s": kube}),
    )
    assert [type(t) for t in made] == [EmulatedTarget, EmulatedTarget, DsnTarget, K8sTarget,
                                       EmulatedTarget, EmulatedTarget]  # fmt: skip
    assert [t.name for t in made[:2]] == ["/mnt/a +0ms", "/mnt/a +1ms"]
    k8s = made[3]
    assert isinstance(k8s, K8sTarget) and k8s.namespace == "bench"
    plain = registry.make_targets(["/mnt/a"], options())
    assert [type(t) for t in plain] == [LocalTarget]
    with pytest.raises(UsageError, match="--wal-dir cannot be combined with an emulated volume"):
        wal = TargetOptions(INSTALL, wal_dir=Path("/w"), kind_options={"local": storage})
        registry.make_targets(["/mnt/a"], wal)


def test_the_memory_limit_is_a_pod_s_limit_and_refused_for_a_server_uri() -> None:
    (pod,) = registry.make_targets(["k8s://fast"], TargetOptions(INSTALL, memory_limit=2**30))
    assert isinstance(pod, K8sTarget) and pod.options.memory_bytes == 2**30
    with pytest.raises(UsageError, match="--memory applies to directory targets only"):
        registry.make_targets(["postgresql://u@h/db"], TargetOptions(INSTALL, memory_limit=2**30))
    with pytest.raises(UsageError, match="--keep applies to directory targets"):
        registry.make_targets(["k8s://fast"], TargetOptions(INSTALL, keep=True))


def test_probe_targets_are_storage_only() -> None:
    path = registry.probe_target("/mnt/a", TargetOptions(INSTALL, keep=True))
    assert isinstance(path, PathTarget) and path.install == INSTALL and path.keep
    volume = registry.probe_target("k8s://fast", options(k8s=K8sOptions(namespace="x")))
    assert isinstance(volume, K8sVolumeTarget) and volume.namespace == "x"
    assert volume.planned().connection is None
    with pytest.raises(UsageError, match="probes one class: drop \\?wal="):
        registry.probe_target("k8s://fast?wal=slow", options())
    with pytest.raises(UsageError, match="a probe's volume is always deleted"):
        registry.probe_target("k8s://fast", TargetOptions(INSTALL, keep=True))
    with pytest.raises(UsageError, match="probe measures storage: it cannot probe a postgresql"):
        registry.probe_target("postgresql://u@h/db", options())


def test_a_fleet_runs_on_one_target_of_a_kind_that_holds_fleets() -> None:
    local = registry.fleet_place(["/mnt/a"], options(), planned=True)
    assert isinstance(local, LocalFleet) and local.workspace.name == "howfast-fleet-XXXXXXXX"
    pods = registry.fleet_place(["k8s://fast"], TargetOptions(INSTALL, memory_limit=2**30))
    assert isinstance(pods, K8sFleet) and pods.options.memory_bytes == 2**30
    expected = (
        "a fleet runs on one target: a directory (its instances live in subdirectories of "
        "it) or a k8s:// StorageClass (one pod each)"
    )
    for texts in (["/mnt/a", "/mnt/b"], ["postgresql://u@h/db"]):
        with pytest.raises(UsageError) as refused:
            registry.fleet_place(texts, options())
        assert refused.value.message == expected
        assert refused.value.hint == "give one --target DIR or --target k8s://CLASS"
    storage = parse({"storage_iops": "500"}, "/mnt/a")
    with pytest.raises(UsageError, match="cannot be combined with --storage-iops, --memory \\(yet"):
        registry.fleet_place(["/mnt/a"], TargetOptions(INSTALL, memory_limit=2**30,
                                                       kind_options=storage))  # fmt: skip


def test_the_place_of_a_k8s_fleet_refuses_limits_before_a_dry_run(tmp_path: Path) -> None:
    plan = parse_plan('[fleet]\nclasses = [{ name = "a", iops = 100 }]\n' + STEP, source="f")
    assert plan.fleet is not None
    pods = registry.fleet_place(["k8s://fast"], options())
    with pytest.raises(UsageError, match="howfast cannot cap a pod's I/O"):
        pods.check_plan(plan.fleet.all_scenarios())  # no cluster contacted
    registry.fleet_place([str(tmp_path)], options(), planned=True).check_plan(
        plan.fleet.all_scenarios()
    )  # a directory's limits are checked against the machine, in check()
    # its directory is checked before a dry run too (it was a traceback in the dry run)
    with pytest.raises(UsageError, match="target directory /mnt/a does not exist"):
        registry.fleet_place(["/mnt/a"], options(), planned=True).check_plan(
            plan.fleet.all_scenarios()
        )


# -- doctor and housekeeping -------------------------------------------------------------


def test_doctor_lists_this_machine_s_checks_then_the_cluster_s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    names = [c.name for c in registry.kind_checks()]
    assert names[:3] == ["cgroup memory limit", "cgroup I/O throttling", "emulated volumes"]
    assert names[3:] == ["user", "loop devices", "drop_caches", "tmpfs for logs", "iptables"]
    (tmp_path / "config").write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    with_cluster = [c.name for c in registry.kind_checks()]
    assert with_cluster[: len(names)] == names and with_cluster[len(names)] == "Kubernetes"


def test_housekeeping_removes_the_empty_cgroup_a_killed_howfast_left() -> None:
    """A real cgroup whose owner lock is let go as a SIGKILL would; only a run with a
    directory target tidies (a k8s:// run makes no cgroup here)."""
    from howfast.machine.cgroup import MemoryCgroup, detect, owner_lock_path

    support = detect()
    if support.version is None:
        pytest.skip(f"no usable memory cgroup here: {support.reason}")
    group = MemoryCgroup(support, f"howfast-{os.getpid():08x}"[-16:], 64 * 2**20)
    group.create()
    try:
        assert registry.housekeeping(["/mnt/a"]) == [] or group.path.exists()  # still owned
        assert group._owner is not None
        os.close(group._owner)  # its howfast is killed: the kernel lets the lock go
        group._owner = None
        assert registry.housekeeping(["k8s://fast"]) == []
        assert group.path.exists()
        done = registry.housekeeping(["/mnt/a"])
        assert f"removed {group.path}: an empty cgroup left by a howfast that was killed" in done
        assert not group.path.exists()
    finally:
        if group.path.exists():
            group.path.rmdir()
        owner_lock_path(group.path.name).unlink(missing_ok=True)


# -- capabilities ------------------------------------------------------------------------


SERVER_HERE = ["HasStorage", "HasServerLog", "HasLocalServer", "Restartable",
               "AppliesStepSettings", "HoldsDirectoryLock"]  # fmt: skip


def k8s_spec() -> tuple[object, K8sOptions]:
    return parse_target("k8s://fast"), K8sOptions(namespace="bench")


def test_each_target_has_the_capabilities_it_declares() -> None:
    spec, kube = k8s_spec()
    local = LocalTarget(Path("/mnt/a"), INSTALL)
    emulated = registry.make_targets(["/mnt/a"], options(local=DirectoryOptions(
        tuple(parse({"storage_latency": "1ms"}, "/a")["local"].variants))))[0]  # type: ignore[attr-defined]  # fmt: skip
    member = FleetMember(Path("/mnt/a/x"), INSTALL, options=LocalOptions(name="m"), scenario="s",
                         klass="c", index=1, limits=None, device=None, support=None,  # type: ignore[arg-type]
                         settings={})  # fmt: skip
    found = {
        "local": describe_capabilities(local),
        "emulated": describe_capabilities(emulated),
        "fleet member": describe_capabilities(member),
        "path": describe_capabilities(PathTarget(Path("/mnt/a"))),
        "dsn": describe_capabilities(DsnTarget("postgresql://u@h/db")),
        "k8s": describe_capabilities(K8sTarget(spec, kube)),  # type: ignore[arg-type]
        "k8s volume": describe_capabilities(K8sVolumeTarget(spec, kube)),  # type: ignore[arg-type]
        "k8s fleet member": describe_capabilities(
            K8sFleetMember(spec, kube, name="m", scenario="s", klass="c", index=1, settings={})  # type: ignore[arg-type]
        ),
        "cnpg": describe_capabilities(registry.make_targets(["cnpg://lab/pg"], options())[0]),
    }
    events = ["HasServerIdentity", "Crashable"]  # issue 29: restart and crash events
    # issue 29: failover (refused before start without --replicas 1, and for fleets)
    # issue 38: partition (its standbys replicate over loopback TCP of their own)
    failover = ["HasCurrentPrimary", "HasStandbys", "Promotable", "Partitionable"]
    assert found == {
        # a local primary has standbys when asked (--replicas; standbys() is [] otherwise)
        "local": [*SERVER_HERE, "Keepable", *events, *failover, "IoCappable", "HasClient"],
        # a local target on a volume storage part: Keepable as every local target, its
        # kept_message() None (--keep is refused on a volume)
        "emulated": [
            *SERVER_HERE,
            "Keepable",
            *events,
            *failover,
            "StorageSlowable",
            "IoCappable",
            "HasClient",
        ],
        "fleet member": [
            *SERVER_HERE,
            "Keepable",
            *events,
            *failover,
            "IoCappable",
            "HasClient",
        ],
        "path": ["HasStorage", "HoldsDirectoryLock", "Keepable"],
        "dsn": [],
        # HasClient: a client pod, or the server's pod (issue 28); PodRecreatable: delete-pod
        # and move, Drainable: drain (issue 29)
        "k8s": [
            "HasStorage",
            "HasServerLog",
            "Restartable",
            "AppliesStepSettings",
            "HasPods",
            "PodRecreatable",
            "Drainable",
            "HasClient",
        ],
        "k8s volume": ["HasStorage", "HasPods"],
        # issue 37: the operator's events, every instance sampled; no storage of its own
        "cnpg": ["HasCurrentPrimary", "HasClient", "OperatorManaged", "HasInstances"],
        "k8s fleet member": [  # a fleet takes no events
            "HasStorage",
            "HasServerLog",
            "Restartable",
            "AppliesStepSettings",
            "HasPods",
            "PodRecreatable",
            "Drainable",
            "HasClient",
        ],
    }


def test_the_base_names_no_capability_so_isinstance_tells() -> None:
    """A runtime protocol's isinstance looks for the names only: a base defining them would
    give every target every capability."""
    for capability in (HasStorage, HasServerLog, HasLocalServer, Restartable, AppliesStepSettings):
        names = [n for n in vars(capability) if not n.startswith("_")]
        assert names and not any(hasattr(Target, n) for n in names), capability


# -- planned targets and the dry run ------------------------------------------------------


def test_a_planned_target_says_what_start_runs_and_creates(tmp_path: Path) -> None:
    local = LocalTarget(tmp_path, INSTALL, options=LocalOptions(checksums=True))
    planned = local.planned()
    assert [what for what, _ in planned.start] == [
        "initdb, as the server's OS user",
        "the server, in its own session",
    ]
    assert "--data-checksums" in planned.start[0][1] and planned.objects == ()
    assert planned.scratch_dir == local.dirs.cluster_dir and not local.dirs.cluster_dir.exists()
    spec, kube = k8s_spec()
    pod = K8sTarget(spec, kube).planned()  # type: ignore[arg-type]
    assert [o["kind"] for o in pod.objects] == ["Secret", "ConfigMap", "PersistentVolumeClaim",
                                                "Pod"]  # fmt: skip
    assert pod.connection is not None and pod.connection.pgbench_args()[3] == "PORT"
    assert pod.host.name == "pod" and pod.start == ()


def test_the_dry_run_prints_a_kind_s_objects_as_yaml_without_knowing_the_kind() -> None:
    from io import StringIO

    from howfast.model import StepSpec
    from howfast.service.dryrun import write_text

    spec, kube = k8s_spec()
    steps = [StepSpec("fio", {"profile": "wal-fsync", "size_bytes": 2**20, "runtime_s": 1})]
    document = plan_document([K8sVolumeTarget(spec, kube)], steps, INSTALL)  # type: ignore[arg-type]
    (target,) = document["targets"]  # type: ignore[misc]
    assert [o["kind"] for o in target["manifests"]] == ["Secret", "PersistentVolumeClaim", "Pod"]
    out = StringIO()
    write_text(document, "howfast probe", out)
    text = out.getvalue()
    assert (
        "# the objects created before the steps, in this order:\napiVersion: v1\nkind: Secret"
        in text
    )
    assert "kind: PersistentVolumeClaim" in text and "\n---\n" in text


# -- a kind added as one module ------------------------------------------------------------


def test_adding_a_target_kind_is_one_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kind for `mem://SIZE` (a directory on a memory filesystem), written as one module
    in the kinds package: recognised, its option declared and parsed, its targets made,
    planned for --dry-run, with no other file edited."""
    (tmp_path / "memdir.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            from howfast.targets.kind import OptionSpec, TargetKind, refuse_unused
            from howfast.targets.local import LocalOptions, LocalTarget


            class MemKind(TargetKind):
                name = "mem"
                order = 30
                usage = "a mem://NAME"
                option_scope = "mem:// targets"
                options = (OptionSpec("mem_root", "--mem-root", "DIR", "mem:// targets: where"),)
                fleet_usage = "a mem://NAME (all in memory)"
                fleet_example = "--target mem://NAME"

                def matches(self, text):
                    return text.startswith("mem://")

                def parse_options(self, values, ctx):
                    if not any(self.matches(t) for t in ctx.targets):
                        refuse_unused(self, values)
                        return None
                    return Path(values.get("mem_root") or "/dev/shm")

                def create(self, text, options):
                    root = options.kind_options[self.name]
                    return [LocalTarget(root / text.removeprefix("mem://"), options.install,
                                        options=LocalOptions(name=text))]


            KIND = MemKind()
            """
        )
    )
    import howfast.targets.kinds as package

    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    registry.kinds.cache_clear()
    try:
        assert registry.kind_for("mem://a").name == "mem"
        assert ("mem", "--mem-root") in {(k.name, o.flag) for k, o in registry.kind_options("run")}
        with pytest.raises(UsageError, match="--mem-root: for mem:// targets only"):
            parse({"mem_root": "/x"}, "/mnt/a")
        parsed = parse({"mem_root": str(tmp_path)}, "mem://a", "/mnt/b")
        (target, other) = registry.make_targets(["mem://a", "/mnt/b"], options(**parsed))
        assert target.name == "mem://a" and isinstance(other, LocalTarget)
        assert target.planned().scratch_dir == tmp_path / "a" / target.dirs.cluster_dir.name  # type: ignore[attr-defined]
        assert registry.local_install(["mem://a"]) == "server"
        with pytest.raises(UsageError, match="or a mem://NAME \\(all in memory\\)"):
            registry.fleet_place(["postgresql://u@h/db"], options())
        with pytest.raises(UsageError, match="give a directory or a mem://NAME or a k8s"):
            registry.kind_for("s3://bucket")
    finally:
        monkeypatch.undo()
        registry.kinds.cache_clear()
        sys.modules.pop("howfast.targets.kinds.memdir", None)
    assert [k.name for k in registry.kinds()] == ["dsn", "cnpg", "k8s", "local"]


def test_the_runner_and_the_dry_run_ask_targets_no_attribute_by_name() -> None:
    """Issue 27: what a target can do is a capability (isinstance), not a hook looked up by
    name; a getattr or hasattr in the runner or the dry run would bring the hooks back."""
    import ast

    import howfast

    root = Path(howfast.__file__).parent
    files = [*sorted((root / "runner").glob("*.py")), root / "service" / "dryrun.py"]
    found = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
    ]
    assert len(files) > 5 and found == []
