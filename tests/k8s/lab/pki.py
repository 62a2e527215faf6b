"""Certificates and kubeconfigs of the lab (openssl, made once, kept in the cache)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.k8s.lab import config
from tests.k8s.lab.config import NodeSpec
from tests.k8s.lab.proc import run

# Where kubeconfigs point: the API server's address on the first node's bridge, which the host
# and the pods both reach (see config.API_ADDRESS).
API_URL = f"https://{config.API_ADDRESS}:{config.API_PORT}"
_DAYS = "3650"


@dataclass(frozen=True)
class Cert:
    name: str
    subject: str
    server_names: tuple[str, ...] = ()  # subjectAltName entries; a server certificate if any


CERTS = (
    Cert(
        "apiserver",
        "/CN=kube-apiserver",
        (
            "IP:127.0.0.1",
            "IP:127.100.0.1",
            # the pod network: the address it listens on, and the `kubernetes` Service's
            f"IP:{config.API_ADDRESS}",
            f"IP:{config.KUBERNETES_SERVICE_IP}",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ),
    ),
    Cert("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client"),
    Cert("admin", "/O=system:masters/CN=howfast-lab-admin"),
    Cert("controller-manager", "/CN=system:kube-controller-manager"),
    Cert("scheduler", "/CN=system:kube-scheduler"),
    Cert("kubelet-client", f"/O=system:nodes/CN=system:node:{config.NODE_NAME}"),
    Cert("kubelet-serving", f"/CN={config.NODE_NAME}", (f"DNS:{config.NODE_NAME}", "IP:127.0.0.1")),
    Cert("provisioner", "/O=system:masters/CN=howfast-lab-provisioner"),
    # bound to the system:node-proxier ClusterRole by the API server's default RBAC
    Cert("kube-proxy", "/CN=system:kube-proxy"),
)
# kubeconfig name -> certificate it authenticates with
KUBECONFIGS = {
    "admin": "admin",
    "controller-manager": "controller-manager",
    "scheduler": "scheduler",
    "kubelet": "kubelet-client",
    "provisioner": "provisioner",
    "kube-proxy": "kube-proxy",
}
# Made again by ensure_network_pki in a PKI made before the lab had a pod network.
NETWORK_CERTS = ("apiserver", "kube-proxy")


def _key(path: Path) -> None:
    run(["openssl", "genrsa", "-out", path, "2048"])
    path.chmod(0o600)


def _sign(pki: Path, cert: Cert, serial: str = "ca.srl") -> None:
    key, crt = pki / f"{cert.name}.key", pki / f"{cert.name}.crt"
    _key(key)
    with tempfile.TemporaryDirectory(dir=pki) as tmp:
        csr, ext = Path(tmp) / "req.csr", Path(tmp) / "ext.cnf"
        run(["openssl", "req", "-new", "-key", key, "-subj", cert.subject, "-out", csr])
        lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
        if cert.server_names:
            lines.append(f"subjectAltName={','.join(cert.server_names)}")
            lines.append("extendedKeyUsage=serverAuth,clientAuth")
        else:
            lines.append("extendedKeyUsage=clientAuth")
        ext.write_text("\n".join(lines) + "\n")
        run(
            [
                "openssl", "x509", "-req", "-in", csr, "-CA", pki / "ca.crt",
                "-CAkey", pki / "ca.key", "-CAserial", pki / serial, "-CAcreateserial",
                "-days", _DAYS,
                "-extfile", ext, "-out", crt,
            ]
        )  # fmt: skip


def kubeconfig(pki: Path, user: str, cert: str, server: str = API_URL) -> str:
    """A kubeconfig (JSON is valid YAML) for `user`, authenticating with certificate `cert`."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "howfast-lab",
                "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki / f"{cert}.crt"),
                    "client-key": str(pki / f"{cert}.key"),
                },
            }
        ],
        "contexts": [{"name": "howfast-lab", "context": {"cluster": "howfast-lab", "user": user}}],
        "current-context": "howfast-lab",
    }
    return json.dumps(doc, indent=2) + "\n"


def ensure_pki(pki: Path) -> None:
    """Make the CA, the service-account key pair, every certificate and kubeconfig (once)."""
    done = pki / ".complete"
    if done.exists():
        return
    pki.mkdir(parents=True, exist_ok=True)
    pki.chmod(0o700)
    _key(pki / "ca.key")
    run(
        [
            "openssl", "req", "-x509", "-new", "-key", pki / "ca.key",
            "-subj", "/CN=howfast-k8s-lab-ca", "-days", _DAYS, "-out", pki / "ca.crt",
        ]
    )  # fmt: skip
    _key(pki / "sa.key")
    run(["openssl", "rsa", "-in", pki / "sa.key", "-pubout", "-out", pki / "sa.pub"])
    for cert in CERTS:
        _sign(pki, cert)
    done.write_text("ok\n")
    (pki / NETWORK_STAMP).write_text(_network_digest() + "\n")


NETWORK_STAMP = ".network-complete"


def _network_digest() -> str:
    certs = [c for c in CERTS if c.name in NETWORK_CERTS]
    return json.dumps([[c.name, c.subject, *c.server_names] for c in certs])


def network_pki_ok(pki: Path) -> bool:
    try:
        return (pki / NETWORK_STAMP).read_text().strip() == _network_digest()
    except OSError:
        return False


def ensure_network_pki(pki: Path) -> None:
    """In a PKI made before the pod network: sign the API server's certificate again with the
    addresses pods dial (the old names kept: a checkout without the pod network still works
    with it) and kube-proxy's. The CA and every other key stay."""
    if network_pki_ok(pki):
        return
    for cert in CERTS:
        if cert.name in NETWORK_CERTS:
            _sign(pki, cert)
    (pki / NETWORK_STAMP).write_text(_network_digest() + "\n")


def write_kubeconfigs(pki: Path, out: Path, nodes: list[NodeSpec]) -> None:
    """Every component's kubeconfig (and the admin's), naming the API server's address, in
    `out` (below run/: written by each `up`)."""
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    wanted = dict(KUBECONFIGS)
    for node in nodes:
        wanted[node.pki_prefix] = node.client_cert
    for name, cert_name in wanted.items():
        path = out / f"{name}.kubeconfig"
        path.write_text(kubeconfig(pki, name, cert_name))
        path.chmod(0o600)


def node_certs(node: NodeSpec) -> tuple[Cert, Cert]:
    """A kubelet's client certificate (what the Node authorizer and NodeRestriction expect of
    node NAME) and its serving certificate."""
    ip = f"IP:{node.address}"
    names = (ip,) if node.name == node.address else (f"DNS:{node.name}", ip)
    return (
        Cert(node.client_cert, f"/O=system:nodes/CN=system:node:{node.name}"),
        Cert(node.serving_cert, f"/CN={node.name}", names),
    )


def ensure_node_pki(node: NodeSpec) -> None:
    """The certificates and kubeconfig of a node added after the lab's PKI was made (once).
    Signed by the lab's CA with a serial file of their own: the lab's files stay untouched."""
    done = node.pki / f".{node.pki_prefix}-complete"
    if node.index == 1 or done.exists():  # the first node's are part of ensure_pki
        return
    for cert in node_certs(node):
        _sign(node.pki, cert, serial=f"{node.pki_prefix}.srl")
    done.write_text("ok\n")
