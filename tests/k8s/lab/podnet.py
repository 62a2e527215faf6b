"""The lab's pod network on this machine: one Linux bridge per node, the CNI configuration that
attaches pods to it, and the safety nets that keep every lab packet on the machine.

- node N: bridge `hflab-brN` at 198.18.(N-1).1/24, its pods in 198.18.(N-1).0/24 (CNI
  `bridge` + `host-local` from Debian's containernetworking-plugins, leases under run/);
  the host routes between the bridges (net.ipv4.ip_forward = 1 while the lab runs).
- a pod's only routes: its subnet and 198.18.0.0/15 via its gateway. No default route, no
  masquerading (ipMasq false).
- the host reaches ClusterIPs (198.19.0.0/16) through the first bridge (a route, so that the
  connect() finds one before kube-proxy's DNAT rewrites the destination).
Safety nets, made before any pod exists:
- a blackhole route for 198.18.0.0/15: a lab address that no bridge holds goes nowhere;
- mangle FORWARD (before the filter table, where kube-proxy's ACCEPT rules are): drop what is
  forwarded between a lab bridge and any other interface, and, when the host forwarded nothing
  before `up`, anything forwarded that is not bridge to bridge;
- mangle POSTROUTING (after every DNAT and reroute, before any SNAT): drop a packet from or to
  198.18.0.0/15 leaving by an interface other than a lab bridge or lo.
Every change is recorded in the state file before it is made (`record`), so that `teardown`
undoes it after a SIGKILLed session too.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from tests.k8s.lab import config
from tests.k8s.lab.config import NodeSpec, Paths
from tests.k8s.lab.proc import log, run

FORWARD_CHAIN = "HOWFAST-LAB-FORWARD"
POSTROUTING_CHAIN = "HOWFAST-LAB-POSTROUTING"
BRIDGES = f"{config.BRIDGE_PREFIX}+"  # iptables' wildcard for every lab bridge
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
CNI_PLUGINS = ("loopback", "bridge", "host-local")
CNI_DIR = Path("/usr/lib/cni")


# --- pure -----------------------------------------------------------------------------------------


def cni_conflist(node: NodeSpec, ipam_dir: Path) -> str:
    """The node's CNI chain: its bridge, host-local addresses of its subnet, one route."""
    doc = {
        "cniVersion": "0.4.0",
        "name": config.CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.subnet, "gateway": node.gateway}]],
                    # the lab's range only: no default route out of a pod
                    "routes": [{"dst": config.LAB_RANGE}],
                    "dataDir": str(ipam_dir),
                },
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def forward_rules(forwarded_before: bool) -> list[list[str]]:
    """The rules of FORWARD_CHAIN (iptables arguments after `-A CHAIN`)."""
    rules = [
        ["-i", BRIDGES, "-o", BRIDGES, "-j", "RETURN"],
        ["-i", BRIDGES, "-j", "DROP"],
        ["-o", BRIDGES, "-j", "DROP"],
    ]
    if not forwarded_before:
        # the host forwarded nothing before `up` (ip_forward 0): it forwards nothing else now
        rules.append(["-j", "DROP"])
    return rules


def postrouting_rules() -> list[list[str]]:
    return [
        ["-o", BRIDGES, "-j", "RETURN"],
        ["-o", "lo", "-j", "RETURN"],
        ["-s", config.LAB_RANGE, "-j", "DROP"],
        ["-d", config.LAB_RANGE, "-j", "DROP"],
    ]


def chains(forwarded_before: bool) -> list[dict[str, Any]]:
    """Every chain the lab makes: tool, table, chain, the built-in chain that jumps to it,
    its rules. IPv6 gets the bridge rules only (pods have link-local IPv6 addresses alone)."""
    made = [
        {"tool": "iptables", "table": "mangle", "chain": FORWARD_CHAIN, "from": "FORWARD",
         "rules": forward_rules(forwarded_before)},
        # IPv6 forwarding is not turned on by the lab: the bridge rules alone
        {"tool": "ip6tables", "table": "mangle", "chain": FORWARD_CHAIN, "from": "FORWARD",
         "rules": forward_rules(True)},
    ]  # fmt: skip
    made.append(
        {"tool": "iptables", "table": "mangle", "chain": POSTROUTING_CHAIN, "from": "POSTROUTING",
         "rules": postrouting_rules()}
    )  # fmt: skip
    return made


def routes(nodes: list[NodeSpec]) -> list[list[str]]:
    """`ip route` arguments after add/del: the blackhole, and the host's way to ClusterIPs."""
    first = nodes[0]
    return [
        ["blackhole", config.LAB_RANGE],
        [config.SERVICE_CIDR, "dev", first.bridge, "src", first.gateway],
    ]


# --- executors ------------------------------------------------------------------------------------


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def lab_interfaces() -> list[str]:
    """The lab's bridges and every interface enslaved to one (the pods' host-side veths)."""
    found = []
    for dev in sorted(Path("/sys/class/net").iterdir()):
        master = dev / "master"
        bridge = master.resolve().name if master.exists() else None
        if dev.name.startswith(config.BRIDGE_PREFIX) or (
            bridge is not None and bridge.startswith(config.BRIDGE_PREFIX)
        ):
            found.append(dev.name)
    return found


def nft_tables() -> list[str] | None:
    """`nft list tables` ("ip filter", "ip6 nat", ...), None without nft."""
    if shutil.which("nft") is None:
        return None
    proc = run(["nft", "list", "tables"], check=False)
    return [ln.removeprefix("table ").strip() for ln in proc.stdout.splitlines() if ln.strip()]


HOST_VIEWS = {
    "iptables-save": ["iptables-save"],
    "ip6tables-save": ["ip6tables-save"],
    "ip link": ["ip", "-o", "link", "show"],
    "ip route": ["ip", "route", "show", "table", "all"],
    "ip -6 route": ["ip", "-6", "route", "show", "table", "all"],
}


def _normalized(view: str, text: str) -> list[str]:
    """A view's lines without what changes on its own: packet counters, comments, link
    statistics and the link's position in the list."""
    lines = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if view.endswith("-save"):
            line = re.sub(r"\[\d+:\d+\]", "[0:0]", line)
        if view == "ip link":
            line = re.sub(r"^\d+: ", "", line)
            line = re.sub(r"\\\s+altname .*$", "", line)
        lines.append(line.rstrip())
    return sorted(lines)


def host_views() -> dict[str, list[str]]:
    """iptables-save, ip6tables-save, ip link and ip route (v4, v6) as `up` found them, for
    the test that compares them after `down`."""
    out = {}
    for view, argv in HOST_VIEWS.items():
        if shutil.which(argv[0]) is None:
            continue
        proc = run(argv, check=False)
        out[view] = _normalized(view, proc.stdout) if proc.returncode == 0 else []
    return out


def snapshot() -> dict[str, Any]:
    """What the network part of the host looks like before `up`."""
    return {
        "host_views": host_views(),
        "ip_forward": IP_FORWARD.read_text().strip(),
        "nft_tables": nft_tables(),
        "bridges": [],
        "routes": [],
        "chains": [],
    }


def setup(paths: Paths, nodes: list[NodeSpec], net: dict[str, Any], record: Any) -> None:
    """Make the bridges, routes, safety nets; `record()` saves `net` (in the state file) and
    is called before each change."""
    for node in nodes:
        if link_exists(node.bridge):
            raise RuntimeError(f"interface {node.bridge} exists already (another lab?)")
    forwarded_before = net["ip_forward"] != "0"
    # The safety nets first: nothing of the lab may leave even while it starts.
    net["routes"] = routes(nodes)[:1]
    record()
    run(["ip", "route", "add", *net["routes"][0]])
    net["chains"] = chains(forwarded_before)
    record()
    for chain in net["chains"]:
        base = [chain["tool"], "-w", "5", "-t", chain["table"]]
        run([*base, "-N", chain["chain"]])
        for rule in chain["rules"]:
            run([*base, "-A", chain["chain"], *rule])
        run([*base, "-I", chain["from"], "1", "-j", chain["chain"]])
    for node in nodes:
        net["bridges"].append(node.bridge)
        record()
        # nf_call_iptables on the bridge itself: a reply bridged between two pods goes
        # through conntrack, so a Service's DNAT is undone whatever the global sysctl says
        run(["ip", "link", "add", node.bridge, "type", "bridge", "nf_call_iptables", "1"])
        run(["ip", "addr", "add", f"{node.gateway}/24", "dev", node.bridge])
        run(["ip", "link", "set", node.bridge, "up"])
        # A pod made again may get the address of one that is gone, and the host would send
        # to the old MAC until its neighbour entry is checked (~5-30 s of lost packets, seen
        # here): check a stale entry after 1 s. (These settings go with the bridge.)
        neigh = Path("/proc/sys/net/ipv4/neigh", node.bridge)
        (neigh / "delay_first_probe_time").write_text("1\n")
        (neigh / "base_reachable_time_ms").write_text("5000\n")
    net["routes"] = routes(nodes)
    record()
    run(["ip", "route", "add", *net["routes"][1]])
    IP_FORWARD.write_text("1\n")  # restored by teardown (and among the watched sysctls)
    for node in nodes:
        node.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        # leases per node: host-local hands out the addresses of a range in turn from the
        # last one it gave, which a directory shared by two ranges would mix up (it then
        # reuses the lowest free address at once)
        (node.dir / "cni-ipam").mkdir(parents=True, exist_ok=True)
        (node.cni_conf_dir / "10-howfast-lab.conflist").write_text(
            cni_conflist(node, node.dir / "cni-ipam")
        )
    for name in CNI_PLUGINS:
        link = paths.run / "cni-bin" / name
        link.unlink(missing_ok=True)
        link.symlink_to(CNI_DIR / name)
    log(
        f"pod network: {', '.join(f'{n.bridge} {n.subnet}' for n in nodes)};"
        f" services {config.SERVICE_CIDR}"
    )


def teardown(net: dict[str, Any]) -> None:
    """Undo `setup` (and whatever the CNI plugins left on our bridges). Idempotent."""
    for chain in net.get("chains", []):
        base = [chain["tool"], "-w", "5", "-t", chain["table"]]
        jump = [*base, "-D", chain["from"], "-j", chain["chain"]]
        while run(jump, check=False).returncode == 0:
            pass
        run([*base, "-F", chain["chain"]], check=False)
        run([*base, "-X", chain["chain"]], check=False)
    for route in reversed(net.get("routes", [])):
        run(["ip", "route", "del", *route], check=False)
    for dev in lab_interfaces():
        if not dev.startswith(config.BRIDGE_PREFIX):
            run(["ip", "link", "del", dev], check=False)  # a pod's veth its netns outlived
    for bridge in net.get("bridges", []):
        if link_exists(bridge):
            run(["ip", "link", "del", bridge], check=False)
    before = net.get("ip_forward")
    if before is not None and IP_FORWARD.read_text().strip() != before:
        IP_FORWARD.write_text(before + "\n")
        log(f"net.ipv4.ip_forward restored to {before}")
    if net.get("chains"):
        log("pod network removed (bridges, routes, chains)")


def remove_new_tables(before: list[str] | None) -> None:
    """Delete the nftables tables iptables-nft created for the lab (kube-proxy's nat, the
    mangle chains above...), once they hold no rule: `iptables-save` prints them otherwise."""
    now = nft_tables()
    if before is None or now is None:
        return
    for table in now:
        if table in before:
            continue
        family, _, name = table.partition(" ")
        tool = {"ip": "iptables", "ip6": "ip6tables"}.get(family)
        if tool is None:
            continue
        listed = run([tool, "-w", "5", "-t", name, "-S"], check=False)
        rules = [ln for ln in listed.stdout.splitlines() if not ln.startswith("-P ")]
        policies_accept = all(ln.endswith(" ACCEPT") for ln in listed.stdout.splitlines())
        if listed.returncode != 0 or rules or not policies_accept:
            log(f"nft table {table} made during the lab is not empty: left as it is")
            continue
        with contextlib.suppress(Exception):
            run(["nft", "delete", "table", family, name])
            log(f"nft table {table} (made during the lab, empty) deleted")
