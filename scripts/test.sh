#!/usr/bin/env bash
# The test suites of `make test`, pytest sessions side by side, and beside them the lint
# and type checks (`make lint typecheck`):
#
# 1. The Kubernetes lab tests (tests/k8s, a real two-node cluster on loopback), from the start.
#    They run in two lanes on the one lab (tests/k8s/lanes.py): the CloudNativePG and
#    in-cluster tests (~5 of its ~15 min, mostly waiting for the operator or a Job) in a
#    pytest session of their own beside the others, which start the lab and take it down once
#    both are done. The lab is built first, alone: a cold build (~15 min, once per machine,
#    cached outside the clone) is CPU-heavy.
# 2. All the others except the emulated-volume tests, from the start, in three pytest-xdist
#    workers (a test file stays on one worker). Most tests spend their time waiting (pgbench
#    for its duration, servers starting, pods and volumes): a whole clean-clone run used
#    1.1 of the 2 cores on average with two workers.
# 3. The emulated-volume tests (marker `emulated`: nbdkit, nbdfuse, loop devices), from the
#    start too, in two workers of their own.
#
# Why all at once: the lab tests take 9-12 min and the emulated-volume tests ~6 min;
# one after the other they alone overran the 15-minute budget.
#
# Priorities (as root): the lab and main sessions at nice -5, the emulated-volume session at
# -10, the lint and type checks at 10. Every test session runs above other work on the
# machine: CI's machine is busy too. The main session ran at nice 0 under the lab's -5 while
# the lab was the longest session; once it had become the longest (36-40 of 37-41 min beside
# two busy loops, the lab 17-19), a test of four refused commands, 2 s of CPU, took 79 s
# beside the lab's daemons and pods. The emulated-volume tests stay above the others: every
# read, write and flush of an emulated volume goes through nbdkit's Python plugin, nbdfuse
# and a loop device, several wake-ups each, so on 2 cores they are the tests most slowed by
# other work (two of them once ran into their time-outs beside the lab). A test that still
# runs out of time ends its howfast with SIGINT first, so that howfast takes its volume down
# (tests/integration/conftest.py).
#
#   HOWFAST_K8S_LAB=0 make test     without the lab tests (they are skipped and say so)
#   extra arguments go to every pytest run (e.g. -x)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

# --tb=short: a failure shows the failing line and its message first, not the whole test's
# source above it (a CI log cut in the middle once kept the source and lost the line).
# --no-loadscope-reorder: files are handed out longest first (tests/conftest.py, LONGEST_FILES),
# not by their number of tests, so that no long file starts when the others are done.
MAIN_OPTIONS=(--tb=short -n 3 --dist loadfile --no-loadscope-reorder --durations=15)
MAIN=(-m "not k8s and not emulated" "${MAIN_OPTIONS[@]}")
# tests/integration only: every emulated-volume test is there (tests/conftest.py refuses one
# elsewhere), and each worker collecting tests/unit's ~2,500 tests too cost it ~10 s of CPU.
EMULATED=(--tb=short -m "emulated and not k8s" -n 2 --dist loadfile --durations=10
    tests/integration)
# The test sessions above other work, the emulated-volume tests' above the others' (their I/O
# goes through user-space processes that must wake up for every request: the others' pgbench
# runs must not delay them). Without root: all at the same priority.
SESSION_NICE=(nice -n -5)
EMULATED_NICE=(nice -n -10)
nice -n -10 true 2>/dev/null || { SESSION_NICE=() && EMULATED_NICE=(); }

logs=$(mktemp -d -t howfast-tests.XXXXXX)
pids=()
# Each session in the background as `( exec ... ) &`: unlike a plain `cmd &`, it keeps
# Python's SIGINT handler, so that a ^C (sent by the terminal to every process of the job)
# ends it as it would end a pytest in the foreground: its fixtures stop what they started.
start() {  # start NAME LOG pytest-args...: a pytest session in the background
    local log=$2
    shift 2
    if [[ $log == - ]]; then
        ("${SESSION_PREFIX[@]}" "$PY" -m pytest "$@") &
    else
        ("${SESSION_PREFIX[@]}" "$PY" -m pytest "$@" >"$log" 2>&1) &
    fi
    pids+=($!)
}
SESSION_PREFIX=(exec)

# ^C: every session got the SIGINT from the terminal too; SIGTERM or SIGHUP (make killed):
# they are sent SIGINT. Either way the script waits for them to clean up, then says what ran.
on_signal() {
    trap '' INT TERM HUP
    if [[ $1 != INT ]]; then
        for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null; done
    fi
    wait
    for log in "$logs"/*.log; do [[ -s $log ]] && cat "$log" >&2; done
    rm -rf "$logs"
    exit 130
}
for sig in INT TERM HUP; do trap "on_signal $sig" "$sig"; done

emulated() {  # the emulated-volume session, output kept for the end
    SESSION_PREFIX=(exec "${EMULATED_NICE[@]}")
    start emulated "$logs/emulated.log" "${EMULATED[@]}" "$@"
    SESSION_PREFIX=(exec)
    emulated_pid=${pids[-1]}
}

show() {  # show TITLE LOG
    echo
    echo "=== $1 ==="
    cat "$2"
}

# Lint and type checks (ruff, import-linter, mypy: about a minute) beside the tests, not before
# them: their outcome is reported with the tests'.
checks() {
    # at a low priority: the lab and emulated-volume sessions need the CPU more as they start
    (exec nice -n 10 make --no-print-directory lint typecheck >"$logs/checks.log" 2>&1) &
    checks_pid=$!
    pids+=("$checks_pid")
}
checks_result() {  # prints the checks' output when they failed; returns their status
    wait "$checks_pid"
    local status=$?
    if ((status != 0)); then show "lint and type checks (failed)" "$logs/checks.log"; fi
    return "$status"
}

if [[ ${HOWFAST_K8S_LAB:-1} == 0 ]]; then  # the lab tests are collected and skipped, with why
    checks
    SESSION_PREFIX=(exec "${SESSION_NICE[@]}")
    start main - -m "not emulated" "${MAIN_OPTIONS[@]}" "$@"
    SESSION_PREFIX=(exec)
    main_pid=${pids[-1]}
    emulated "$@"
    wait "$main_pid"
    main_status=$?
    wait "$emulated_pid"
    emulated_status=$?
    show "emulated-volume tests (beside the others)" "$logs/emulated.log"
    checks_result
    checks_status=$?
    rm -rf "$logs"
    echo "test.sh: lint and type checks exit $checks_status, other tests exit $main_status," \
        "emulated-volume tests exit $emulated_status"
    ((checks_status == 0 && main_status == 0 && emulated_status == 0))
    exit
fi
export HOWFAST_K8S_LAB=1

# Builds or finds the binaries and images; when this machine cannot build them (no root, too
# little disk...), the lab tests skip themselves with the reason. On a fresh machine the build
# (~19 CPU-minutes) is the critical path of the whole run, so it runs at the lab session's
# priority, not at the lab's default nice 10: beside two busy loops at nice 0, nice 10 gets
# about a tenth of the CPU (a cold build took 41 min at nice 19 beside this machine's load).
HOWFAST_K8S_LAB_BUILD_NICE=0 "${SESSION_NICE[@]}" "$PY" -m tests.k8s.lab build >/dev/null ||
    echo "test.sh: the k8s lab could not be built here; its tests will say why" >&2

checks
# The lab tests at the main session's priority, in two lanes (tests/k8s/lanes.py), which meet
# in $lanes_dir: the guest lane's files, and the others, whose lane owns the lab.
lanes_dir=$(mktemp -d "$logs/lanes.XXXXXX")
GUEST_FILES=(tests/k8s/test_cnpg.py tests/k8s/test_cnpg_lab.py tests/k8s/test_in_cluster.py)
LANE=(env HOWFAST_K8S_LAB_LANES_DIR="$lanes_dir")
SESSION_PREFIX=(exec "${LANE[@]}" HOWFAST_K8S_LAB_LANE=owner "${SESSION_NICE[@]}")
start k8s "$logs/k8s.log" --tb=short -m k8s tests/k8s "${GUEST_FILES[@]/#/--ignore=}" \
    -p no:cacheprovider --durations=20 "$@"
k8s_pid=${pids[-1]}
SESSION_PREFIX=(exec "${LANE[@]}" HOWFAST_K8S_LAB_LANE=guest "${SESSION_NICE[@]}")
start guest "$logs/k8s-guest.log" --tb=short -m k8s "${GUEST_FILES[@]}" -p no:cacheprovider \
    --durations=10 "$@"
guest_pid=${pids[-1]}
SESSION_PREFIX=(exec "${SESSION_NICE[@]}")
start main - "${MAIN[@]}" "$@"
SESSION_PREFIX=(exec)
main_pid=${pids[-1]}
emulated "$@"

wait "$k8s_pid"
k8s_status=$?
wait "$guest_pid"
guest_status=$?
wait "$main_pid"
main_status=$?
wait "$emulated_pid"
emulated_status=$?
trap - INT TERM HUP

show "Kubernetes lab tests (tests/k8s, run beside the others)" "$logs/k8s.log"
show "Kubernetes lab tests on CloudNativePG and in-cluster Jobs (a lane of their own)" \
    "$logs/k8s-guest.log"
show "emulated-volume tests (beside the others)" "$logs/emulated.log"
checks_result
checks_status=$?
rm -rf "$logs"
echo "test.sh: lint and type checks exit $checks_status, other tests exit $main_status," \
    "Kubernetes lab tests exit $k8s_status and $guest_status (CloudNativePG, in-cluster)," \
    "emulated-volume tests exit $emulated_status"
((checks_status == 0 && main_status == 0 && k8s_status == 0 && guest_status == 0 &&
    emulated_status == 0))
