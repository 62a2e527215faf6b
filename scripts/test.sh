#!/usr/bin/env bash
# The test suites of `make test`, in two phases:
#
# 1. The Kubernetes lab tests (tests/k8s, a real two-node cluster on loopback) and all the
#    others except the emulated-volume tests, side by side, the others in two pytest-xdist
#    workers (a test file stays on one worker). Most tests spend their time waiting (pgbench
#    for its duration, servers starting, pods and volumes), so running them side by side keeps
#    `make test` within its time budget. The lab is built first, alone: a cold build (~15 min,
#    once per machine, cached outside the clone) is CPU-heavy.
# 2. The emulated-volume tests (marker `emulated`: nbdkit, nbdfuse, loop devices), once phase
#    1 has ended, in two xdist workers of their own.
#
# Why the emulated-volume tests have a phase of their own: every read, write and flush of
# such a volume goes through nbdkit's Python plugin, nbdfuse and a loop device, several
# wake-ups each, so on 2 cores they are the tests most slowed by other work. Beside the lab's
# control plane (etcd, the API server, the kubelets) and the other xdist worker, two of them
# ran into their time-outs (300 s and 240 s) in a fresh-clone `make test`, though they pass
# alone in ~150 s; killed there, they left their volumes mounted (issue 26). They mostly wait
# (their delays, pgbench's durations) and use little CPU (user+sys 135 s over 158 s of wall
# for all 8), so two of them side by side do not slow each other much: on this project's
# 2-core machine at a load of 2.5-3 from other work, the phase took 158 s in two workers (the
# tests' own times add up to 275 s; 390 s one after the other at a load of 5-11).
# The cost, reasoned from the earlier notes' --durations (the whole suite is not run here):
# the lab tests take 380-400 s beside the others, and the others end about 140 s sooner than
# before without the emulated tests (275 s of tests over two workers), near the lab tests'
# end; so `make test` (~560 s) grows by about the emulated phase less what phase 1 saves:
# to ~600-720 s, inside the 15-minute budget. A test that still
# runs out of time ends its howfast with SIGINT first, so that howfast takes its volume down
# (tests/integration/conftest.py).
#
#   HOWFAST_K8S_LAB=0 make test     without the lab tests (they are skipped and say so)
#   extra arguments go to every pytest run (e.g. -x)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

MAIN=(-m "not k8s and not emulated" -n 2 --dist loadfile --durations=15)
EMULATED=(-m "emulated and not k8s" -n 2 --dist loadfile --durations=10 tests)

# Phase 2: after phase 1, whatever its outcome; the run fails if either phase failed.
run_emulated() {
    echo
    echo "=== emulated-volume tests (after the others, two at a time) ==="
    "$PY" -m pytest "${EMULATED[@]}" "$@"
}

if [[ ${HOWFAST_K8S_LAB:-1} == 0 ]]; then  # the lab tests are collected and skipped, with why
    "$PY" -m pytest -m "not emulated" "${MAIN[@]:2}" "$@"
    main_status=$?
    run_emulated "$@"
    emulated_status=$?
    echo "test.sh: other tests exit $main_status, emulated-volume tests exit $emulated_status"
    ((main_status == 0 && emulated_status == 0))
    exit
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

run_emulated "$@"
emulated_status=$?
echo "test.sh: other tests exit $main_status, Kubernetes lab tests exit $k8s_status," \
    "emulated-volume tests exit $emulated_status"
((main_status == 0 && k8s_status == 0 && emulated_status == 0))
