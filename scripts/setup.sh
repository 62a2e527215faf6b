#!/usr/bin/env bash
# Installs what howfast needs when it is missing: PostgreSQL server with pgbench and
# pg_test_fsync, fio, Python >= 3.11 with venv, uv, then the locked Python environment.
# `setup.sh test` also installs Chromium, which the tests use to open HTML reports as a
# person would. As root it installs OS packages with apt-get; otherwise it prints the command.
set -euo pipefail
cd "$(dirname "$0")/.."
PURPOSE=${1:-run}

UV_VERSION=0.13.9
APT_PACKAGES=()

have_pg_server() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        [[ -x "$dir/initdb" && -x "$dir/pg_ctl" && -x "$dir/pgbench" ]] && return 0
    done
    command -v initdb >/dev/null && command -v pg_ctl >/dev/null && command -v pgbench >/dev/null
}

python_ok() {
    command -v python3 >/dev/null &&
        python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}

have_pg_server || APT_PACKAGES+=(postgresql postgresql-contrib)
command -v fio >/dev/null || APT_PACKAGES+=(fio)
python_ok || APT_PACKAGES+=(python3 python3-venv)
if [[ $PURPOSE == test ]]; then
    command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
        APT_PACKAGES+=(chromium)
    # Emulated volumes (--storage-latency): their tests build real layers.
    command -v nbdkit >/dev/null || APT_PACKAGES+=(nbdkit)
    # nbdkit's python plugin runs howfast's delay plugin (it delays flushes too).
    compgen -G '/usr/lib*/*nbdkit/plugins/nbdkit-python-plugin.so' >/dev/null ||
        compgen -G '/usr/lib/*/nbdkit/plugins/nbdkit-python-plugin.so' >/dev/null ||
        APT_PACKAGES+=(nbdkit-plugin-python)
    command -v nbdfuse >/dev/null || APT_PACKAGES+=(libnbd-bin)
    # partition events cut a standby's replication with iptables (tests/integration).
    command -v iptables >/dev/null || [[ -x /usr/sbin/iptables ]] || APT_PACKAGES+=(iptables)
    # Prometheus and node_exporter for tests/integration/test_prometheus.py, which starts its
    # own instances on loopback ports; the system services are never started (below).
    [[ -x /usr/bin/prometheus ]] || APT_PACKAGES+=(prometheus)
    [[ -x /usr/bin/prometheus-node-exporter ]] || APT_PACKAGES+=(prometheus-node-exporter)
fi

if ((${#APT_PACKAGES[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "setup: installing ${APT_PACKAGES[*]} with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # Packages with services (prometheus, node_exporter) are installed, not started: a
        # policy-rc.d that denies every start, only for this install, unless one exists.
        NO_START=
        if [[ ! -e /usr/sbin/policy-rc.d ]]; then
            printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
            chmod 755 /usr/sbin/policy-rc.d
            NO_START=1
        fi
        apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
        if [[ -n $NO_START ]]; then rm -f /usr/sbin/policy-rc.d; fi
        # ...nor at the next boot: the tests run their own, on loopback.
        for svc in prometheus prometheus-node-exporter; do
            if [[ " ${APT_PACKAGES[*]} " == *" $svc "* ]]; then
                DPKG_MAINTSCRIPT_PACKAGE=$svc \
                    deb-systemd-helper disable "$svc.service" >/dev/null 2>&1 || true
                update-rc.d "$svc" disable >/dev/null 2>&1 || true
            fi
        done
    else
        echo "setup: missing OS packages. Install them with:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y ${APT_PACKAGES[*]}" >&2
        exit 1
    fi
fi

# The tests read wait events through pg_wait_sampling too, where Debian packages it for the
# installed PostgreSQL (postgresql-NN-pg-wait-sampling); without it that test is skipped.
if [[ $PURPOSE == test && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    major=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
    if [[ -n $major && ! -e /usr/lib/postgresql/$major/lib/pg_wait_sampling.so ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "postgresql-$major-pg-wait-sampling" >/dev/null 2>&1 ||
            echo "setup: postgresql-$major-pg-wait-sampling is not available; its test is skipped" >&2
    fi
fi

# uv: the one on PATH, else a private copy from PyPI in .tools/ (no system pip needed).
if command -v uv >/dev/null; then
    UV=$(command -v uv)
else
    if [[ ! -x .tools/bin/uv ]]; then
        echo "setup: installing uv $UV_VERSION into .tools/" >&2
        python3 -m venv .tools
        .tools/bin/pip install -q "uv==$UV_VERSION"
    fi
    UV=.tools/bin/uv
fi

# The system Python is enough; never download an interpreter.
export UV_PYTHON_DOWNLOADS=never
# Bytecode compiled ahead: where PYTHONDONTWRITEBYTECODE is set (as on this project's CI
# machines) Python would otherwise compile every module from source in every process, ~1.5 s
# of CPU for each howfast command. uv compiles the dependencies once; compileall is quick
# for the project's own files when they have not changed.
"$UV" sync --frozen --quiet --compile-bytecode
.venv/bin/python -m compileall -q -j0 src tests benchmarks >/dev/null
echo "setup: ready (.venv/bin/howfast)" >&2
