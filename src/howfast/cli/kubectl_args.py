"""`kubectl howfast ...`: kubectl's own flags on howfast's command line (docs/kubectl.md).

kubectl runs a plugin named `kubectl-howfast` found on the PATH with the arguments after
`howfast`, and passes none of its own flags on (it refuses flags before a plugin's name). A
user of kubectl writes `-n NS`, `--context NAME` and `--kubeconfig FILE`; howfast's own are
`--namespace NS`, `--kube-context NAME` and the KUBECONFIG variable, which the Kubernetes
target reads when it loads the configuration (targets/k8s/cluster.py). Pure: the argument
list in, howfast's argument list and the kubeconfig to set out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from howfast.errors import UsageError

PROG = "kubectl howfast"


@dataclass(frozen=True)
class Translated:
    argv: list[str]
    kubeconfig: str | None  # for KUBECONFIG; None: leave it as it is


def _split(arg: str) -> tuple[str, str | None]:
    """'--context=prod' -> ('--context', 'prod'); '-nbench' and '-n=bench' -> ('-n',
    'bench'), as kubectl reads them; anything else -> (arg, None)."""
    if arg.startswith("--"):
        name, eq, value = arg.partition("=")
        return (name, value) if eq else (arg, None)
    if arg.startswith("-n") and len(arg) > 2:
        return "-n", arg[2:].removeprefix("=")
    return arg, None


def translate(argv: list[str]) -> Translated:
    """kubectl's -n/--namespace, --context and --kubeconfig as howfast's options; every
    other argument unchanged, in order; nothing after `--`."""
    out: list[str] = []
    kubeconfig: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out += argv[i:]
            break
        name, value = _split(arg)
        if name not in ("-n", "--namespace", "--context", "--kubeconfig"):
            out.append(arg)
            i += 1
            continue
        if value is None:  # the value is the next argument
            if i + 1 >= len(argv) or (argv[i + 1].startswith("-") and argv[i + 1] != "-"):
                raise UsageError(f"{name} needs a value", f"e.g. {PROG} {name} VALUE ...")
            value = argv[i + 1]
            i += 1
        i += 1
        if not value:
            raise UsageError(f"{name}: empty value")
        if name == "--kubeconfig":
            kubeconfig = _kubeconfig(value)
        elif name == "--context":
            out += ["--kube-context", value]
        else:
            out += ["--namespace", value]
    return Translated(out, kubeconfig)


def _kubeconfig(value: str) -> str:
    """The file's absolute path; UsageError when it is not a file (kubectl refuses too)."""
    path = Path(value).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise UsageError(f"--kubeconfig {value}: {what}", "give the path of a kubeconfig file")
    return str(path.resolve())
