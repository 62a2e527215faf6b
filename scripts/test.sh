#!/usr/bin/env bash
# The test suites of `make test`: the Kubernetes lab tests (tests/k8s, a real two-node
# cluster on loopback) and all the others, side by side, the others in two pytest-xdist
# workers (a test file stays on one worker). Most tests spend their time waiting (pgbench for
# its duration, servers starting, pods and volumes), so running them side by side keeps
# `make test` within its time budget. The lab is built first, alone: a cold build (~15 min,
# once per machine, cached outside the clone) is CPU-heavy.
#
#   HOWFAST_K8S_LAB=0 make test     without the lab tests (they are skipped and say so)
#   extra arguments go to both pytest runs (e.g. -x)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

MAIN=(-m "not k8s" -n 2 --dist loadfile --durations=15)
if [[ ${HOWFAST_K8S_LAB:-1} == 0 ]]; then  # the lab tests are collected and skipped, with why
    exec "$PY" -m pytest -n 2 --dist loadfile --durations=15 "$@"
fi
export HOWFAST_K8S_LAB=1

# Builds or finds the binaries and images; when this machine cannot build them (no root, too
# little disk...), the lab tests skip themselves with the reason.
"$PY" -m tests.k8s.lab build >/dev/null ||
    echo "test.sh: the k8s lab could not be built here; its tests will say why" >&2

k8s_log=$(mktemp -t howfast-k8s-tests.XXXXXX)
"$PY" -m pytest -m k8s tests/k8s -p no:cacheprovider --durations=5 "$@" >"$k8s_log" 2>&1 &
k8s_pid=$!

# Ctrl-C or a kill: the lab session gets SIGINT, so that its fixture stops the cluster and
# restores the host before this script ends.
stop_k8s() {
    kill -INT "$k8s_pid" 2>/dev/null
    wait "$k8s_pid" 2>/dev/null
    cat "$k8s_log" >&2
    rm -f "$k8s_log"
    exit 130
}
trap stop_k8s INT TERM HUP

"$PY" -m pytest "${MAIN[@]}" "$@"
main_status=$?
wait "$k8s_pid"
k8s_status=$?
trap - INT TERM HUP

echo
echo "=== Kubernetes lab tests (tests/k8s, run beside the others) ==="
cat "$k8s_log"
rm -f "$k8s_log"
echo "test.sh: other tests exit $main_status, Kubernetes lab tests exit $k8s_status"
((main_status == 0 && k8s_status == 0))
