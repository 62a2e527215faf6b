"""`--event AT:ACTION` and a plan's `events` list: every action, its value and `for=`, exec's
quoting, and errors that say which event, which part and what is accepted."""

from __future__ import annotations

import re

import pytest

from howfast.errors import ExitStatus, UsageError
from howfast.event_marks import EventMark, marks_from_section
from howfast.eventspec import (
    MAX_EVENT_S,
    MAX_IOPS,
    RESOLUTION_DIGITS,
    EventSpec,
    ordered,
    step_refusals,
)
from howfast.plugin.events import (
    action_syntaxes,
    disturbs_service,
    event_from_table,
    event_from_text,
    grammar,
    parse_event,
    plan_event,
)
from howfast.units import plain_number


@pytest.mark.parametrize(
    ("text", "at_s", "action", "arg", "for_s", "canonical"),
    [
        ("20s:checkpoint", 20.0, "checkpoint", None, None, "20s:checkpoint"),
        ("3s:restart", 3.0, "restart", None, None, "3s:restart"),
        ("7:crash", 7.0, "crash", None, None, "7s:crash"),
        ("0:crash", 0.0, "crash", None, None, "0s:crash"),
        ("0s:checkpoint", 0.0, "checkpoint", None, None, "0s:checkpoint"),
        ("500ms:restart", 0.5, "restart", None, None, "0.5s:restart"),
        ("1m30s:failover", 90.0, "failover", None, None, "90s:failover"),
        ("1m:failover=standby_2", 60.0, "failover", "standby_2", None, "60s:failover=standby_2"),
        ("10s:delete-pod", 10.0, "delete-pod", None, None, "10s:delete-pod"),
        ("10s:move", 10.0, "move", None, None, "10s:move"),
        ("10s:move=127.0.0.2", 10.0, "move", "127.0.0.2", None, "10s:move=127.0.0.2"),
        ("5s:drain=node-b,for=10s", 5.0, "drain", "node-b", 10.0, "5s:drain=node-b,for=10s"),
        ("5s:drain=node-b", 5.0, "drain", "node-b", None, "5s:drain=node-b"),
        ("3s:slow-storage=5ms,for=4s", 3.0, "slow-storage", "5ms", 4.0,
         "3s:slow-storage=5ms,for=4s"),
        ("3s:slow-storage=0.002s", 3.0, "slow-storage", "2ms", None, "3s:slow-storage=2ms"),
        ("3s:slow-storage=0", 3.0, "slow-storage", "0ms", None, "3s:slow-storage=0ms"),
        ("2s:cap-iops=050,for=4s", 2.0, "cap-iops", "50", 4.0, "2s:cap-iops=50,for=4s"),
        ("  2s : restart  ", 2.0, "restart", None, None, "2s:restart"),
    ],
)  # fmt: skip
def test_every_action_parses_to_its_canonical_text(text, at_s, action, arg, for_s, canonical):
    spec = event_from_text(text)
    assert (spec.at_s, spec.action, spec.arg, spec.for_s) == (at_s, action, arg, for_s)
    assert spec.text == canonical
    assert spec.given == text.strip()
    assert event_from_text(canonical) == EventSpec(at_s, action, arg, (), for_s, canonical)


def test_values_are_read_in_their_units():
    assert event_from_text("3s:slow-storage=5ms").latency_ms == 5.0
    assert event_from_text("3s:slow-storage=0.5ms").latency_ms == 0.5
    assert event_from_text("2s:cap-iops=200").iops == 200
    assert event_from_text("2s:restart").latency_ms is None
    assert event_from_text("2s:cap-iops=200,for=3s").ends_s == 5.0
    assert event_from_text("2s:restart").ends_s is None


def test_exec_takes_the_rest_as_words_with_quotes_and_commas_never_a_shell():
    spec = event_from_text("""4s:exec=touch "/tmp/a b" 'it''s' x,for=2s $HOME;rm""")
    assert spec.action == "exec"
    assert spec.argv == ("touch", "/tmp/a b", "its", "x,for=2s", "$HOME;rm")
    assert spec.for_s is None and spec.arg is None
    # the canonical text quotes so that it parses back to the same words
    assert event_from_text(spec.text).argv == spec.argv


def test_a_plan_table_gives_exact_arguments_or_an_action():
    table = event_from_table({"at": "20s", "exec": ["iptables", "-A", "a b", "$X"]})
    assert table.argv == ("iptables", "-A", "a b", "$X") and table.at_s == 20.0
    assert event_from_text(table.text).argv == table.argv
    assert event_from_table({"at": 5, "action": "restart"}).text == "5s:restart"
    assert event_from_table({"at": "1.5s", "action": "slow-storage=5ms,for=2s"}).for_s == 2.0
    assert plan_event("3s:crash") == event_from_text("3s:crash")
    assert plan_event({"at": "3s", "action": "crash"}).text == "3s:crash"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("restart", ['"restart": write AT:ACTION, e.g. 20s:restart', "checkpoint, restart"]),
        ("20s:restrat", ['unknown action "restrat"', "slow-storage=LATENCY[,for=D]"]),
        ("20s:", ['unknown action ""', "exec=ARGV"]),
        ("x:restart", ['"x" is not a time into the step', '"1m30s"']),
        ("-5s:restart", ['"-5s": a time into the step is 0 or more']),
        ("1m30:restart", ['"1m30" is not a time into the step']),
        ("5s:restart=now", ["restart takes no value; write restart"]),
        ("5s:restart,for=3s", ['restart takes no option "for=3s"; write restart']),
        ("5s:crash now", ['unexpected "now"; write crash']),
        ("5s:failover=", ["the value after = is empty; write failover[=STANDBY]"]),
        ("5s:failover=bad name", ['"bad name" is not a standby\'s name']),
        ("5s:move=Node_A", ['"Node_A" is not a node\'s name', "move[=NODE]"]),
        ("5s:drain", ["drain needs a value; write drain=NODE[,for=D]"]),
        ("5s:drain,for=10s", ["drain needs a value; write drain=NODE[,for=D]"]),
        ("5s:slow-storage", ["slow-storage needs a value; write slow-storage=LATENCY[,for=D]"]),
        ("5s:slow-storage=fast", ['"fast" is not a latency', "slow-storage=5ms"]),
        ("5s:slow-storage=-1ms", ['"-1ms" is not a latency']),
        ("5s:slow-storage=5ms,for=", ["for= is not a duration; write for=D"]),
        ("5s:slow-storage=5ms,for=0s", ["for= must be more than zero"]),
        ("5s:slow-storage=5ms,for=2s,for=3s", ["for= is given twice"]),
        ("5s:slow-storage=5ms,until=2s", ['slow-storage takes no option "until=2s"']),
        ("5s:cap-iops=0", ['"0" is not a number of I/O operations per second', "cap-iops=200"]),
        ("5s:cap-iops=1.5", ['"1.5" is not a number of I/O operations per second']),
        ("5s:exec=", ["exec needs a command; write exec=ARGV"]),
        ("5s:exec", ["write exec=ARGV"]),
        ("5s:exec=echo 'open", ["cannot be split into words (No closing quotation)",
                                "exec = [...]"]),
    ],
)  # fmt: skip
def test_mistakes_say_which_event_which_part_and_what_is_accepted(text, says):
    with pytest.raises(ValueError) as raised:
        event_from_text(text)
    message = str(raised.value)
    for part in says:
        assert part in message


def test_the_option_error_is_a_usage_error_naming_the_option():
    with pytest.raises(UsageError) as raised:
        parse_event("20s:reboot")
    assert raised.value.exit_status == ExitStatus.USAGE
    assert str(raised.value).startswith('--event "20s:reboot": unknown action "reboot"')


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ({"at": "5s"}, 'needs one of "action"'),
        ({"at": "5s", "action": "restart", "exec": ["x"]}, 'needs one of "action"'),
        ({"action": "restart"}, 'needs "at"'),
        ({"at": "5s", "exec": "touch x"}, "a non-empty list of strings"),
        ({"at": "5s", "exec": []}, "a non-empty list of strings"),
        ({"at": "5s", "exec": [""]}, "a non-empty list of strings"),
        ({"at": "5s", "exec": ["touch", 3]}, "a non-empty list of strings"),
        ({"at": "5s", "action": 3}, "write the action as text"),
        ({"at": True, "action": "restart"}, "write a duration"),
        ({"at": "5s", "action": "restart", "when": "now"}, 'has no key "when"; its keys: at'),
        (3, 'an event is a text such as "20s:restart"'),
    ],
)
def test_plan_items_that_are_wrong_say_how_to_write_them(item, says):
    with pytest.raises(ValueError) as raised:
        plan_event(item)
    assert says in str(raised.value)


def test_the_grammar_lists_every_action():
    # The grammar is the registered actions' (each declared by its module in events/).
    actions = action_syntaxes()
    assert set(actions) == {
        "checkpoint", "restart", "crash", "failover", "switchover", "delete-pod", "move",
        "drain", "slow-storage", "cap-iops", "exec", "partition",
    }  # fmt: skip
    for syntax in actions.values():
        assert syntax.usage in grammar()
    assert {a for a, s in actions.items() if s.disturbs_service} == {
        "restart", "crash", "failover", "switchover", "delete-pod", "move", "drain",
    }  # fmt: skip


def test_events_are_ordered_by_time_and_keep_their_order_at_the_same_time():
    specs = [event_from_text(t) for t in ("7s:crash", "3s:restart", "3s:checkpoint")]
    assert [s.text for s in ordered(specs)] == ["3s:restart", "3s:checkpoint", "7s:crash"]


def test_step_refusals_say_what_does_not_fit_the_step():
    def refusals(*texts: str, **kw: object) -> list[str]:
        return step_refusals([event_from_text(t) for t in texts], **kw)  # type: ignore[arg-type]

    assert refusals("3s:restart", "7s:crash", duration_s=10) == []
    assert refusals(duration_s=None, transactions=100) == []  # no events: nothing to refuse
    assert refusals("3s:restart", duration_s=None, transactions=1000) == [
        "events need a duration: -t steps end when their transactions are done"
    ]
    assert refusals("30s:restart", duration_s=20) == [
        "event 30s:restart is past the end of a 20 s step"
    ]
    assert refusals("20s:restart", duration_s=20) == [
        "event 20s:restart is past the end of a 20 s step"
    ]
    assert refusals("5s:slow-storage=5ms,for=20s", duration_s=20) == [
        "event 5s:slow-storage=5ms,for=20s ends after the step (25 s of 20 s): its window "
        "must be measured whole"
    ]
    assert refusals("5s:slow-storage=5ms,for=15s", duration_s=20) == []
    assert refusals("5s:slow-storage=150ms", duration_s=20, max_added_latency_ms=100.0) == [
        "event 5s:slow-storage=150ms: an emulated volume adds at most 100 ms"
    ]
    assert refusals("5s:slow-storage=100ms", duration_s=20, max_added_latency_ms=100.0) == []
    assert refusals("2s:slow-storage=5ms,for=5s", "4s:slow-storage=9ms,for=2s", duration_s=20) == [
        "events 2s:slow-storage=5ms,for=5s and 4s:slow-storage=9ms,for=2s overlap: the first "
        "one's end would undo the second"
    ]
    # back to back, or different actions: no overlap
    assert refusals("2s:slow-storage=5ms,for=2s", "4s:slow-storage=9ms,for=2s", duration_s=20) == []
    assert refusals("2s:slow-storage=5ms,for=5s", "3s:cap-iops=50,for=5s", duration_s=20) == []


def test_a_mark_round_trips_through_its_stored_document():
    mark = EventMark(
        index=1, text="3s:restart", action="restart", at_s=3.0, applied_s=3.01, back_s=3.4,
        verified=True, evidence={"pid_before": 10, "pid_after": 20}, facts={"how": "SIGINT"},
    )  # fmt: skip
    (back,) = marks_from_section([mark.document()])
    assert back == mark
    assert disturbs_service(back.action)
    assert not disturbs_service(EventMark(2, "5s:checkpoint", "checkpoint", 5.0).action)
    assert marks_from_section(None) == () and marks_from_section("x") == ()


# --- times kept as numbers, written so that they read back (issue 35) -----------------------

# Many values, from a microsecond to the bound, whole and fractional: what used to be written
# with %g ("1e+06s", "1.23457e+06s") and then refused by the grammar that reads it back.
_TIMES = sorted(
    {0.0, 0.000001, 0.000123, 0.1, 0.3, 0.5, 1.0, 7.25, 59.999999, 90.0, 999999.999999,
     1000000.0, 1234567.0, 1234567.125, 10_000_000.0, 31_622_400.0}
    | {round(1.37**k, 6) for k in range(-40, 56)}
    | {k / 7 for k in range(0, 2000, 13)}
)  # fmt: skip


@pytest.mark.parametrize("action", ["checkpoint", "slow-storage=5ms,for=", "cap-iops=200,for="])
def test_every_time_reads_back_from_its_canonical_text(action):
    for value in _TIMES:
        if value > MAX_EVENT_S:
            continue
        at = round(value, RESOLUTION_DIGITS)
        text = f"{plain_number(at)}s:{action}" + (
            f"{plain_number(at or 1)}s" if "for=" in action else ""
        )
        spec = event_from_text(text)
        again = event_from_text(spec.text)
        assert again.text == spec.text and again.at_s == spec.at_s == at, text
        assert again.for_s == spec.for_s
        assert "e" not in spec.text.partition(":")[0], spec.text  # never an exponent


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1000000s:checkpoint", "1000000s:checkpoint"),
        ("0.000001s:checkpoint", "0.000001s:checkpoint"),
        ("1s:slow-storage=5ms,for=1000000s", "1s:slow-storage=5ms,for=1000000s"),
        ("1234567s:checkpoint", "1234567s:checkpoint"),
        ("0.1s0.2s:checkpoint", "0.3s:checkpoint"),  # parts summed exactly: no 0.30000000000000004
        ("0.0000004s:checkpoint", "0s:checkpoint"),  # kept to the microsecond
        ("3s:slow-storage=0.007ms", "3s:slow-storage=0.007ms"),
    ],
)
def test_the_audits_times_parse_and_read_back(text, canonical):
    spec = event_from_text(text)
    assert spec.text == canonical
    assert event_from_text(spec.text).text == canonical


def test_a_plan_tables_number_is_a_time_in_seconds_written_to_read_back():
    assert event_from_table({"at": 1e7, "action": "checkpoint"}).text == "10000000s:checkpoint"
    assert event_from_table({"at": 2.5, "exec": ["true"]}).text == "2.5s:exec=true"
    assert plan_event({"at": 1234567, "action": "crash"}).text == "1234567s:crash"


@pytest.mark.parametrize(
    ("at", "says"),
    [
        (float("nan"), "at = NaN: write a duration"),
        (float("inf"), "at = Infinity: write a duration"),
        (-1, "at = -1: a time into the step is 0 or more"),
        (1e300, "at most 31622400 s (a year) into a step"),
    ],
)
def test_a_plan_tables_number_out_of_bounds_is_refused_clearly(at, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        event_from_table({"at": at, "action": "checkpoint"})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("99999999999s:crash", "at most 31622400 s (a year) into a step"),
        ("1s:slow-storage=5ms,for=999999999s", "a window lasts at most 31622400 s"),
        ("1e6s:crash", '"1e6s" is not a time into the step'),
        ("nan:crash", '"nan" is not a time into the step'),
        ("infs:crash", '"infs" is not a time into the step'),
    ],
)
def test_times_out_of_bounds_or_in_exponent_form_are_refused(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        event_from_text(text)


def test_cap_iops_is_bounded_by_what_the_kernel_keeps():
    assert event_from_text(f"1s:cap-iops={MAX_IOPS}").iops == 2**32 - 2
    for value in (str(MAX_IOPS + 1), "99999999999999999999999999", "9" * 5000):
        with pytest.raises(ValueError, match="cap-iops takes at most 4294967294"):
            event_from_text(f"1s:cap-iops={value}")
    with pytest.raises(ValueError, match="is not a number of I/O operations"):
        event_from_text("1s:cap-iops=\u00b2")  # a digit to str.isdigit(), not to int()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1s:réstart", 'unknown action "réstart"; did you mean "restart"?'),
        ("1s:Restart", 'unknown action "Restart"; did you mean "restart"?'),
        ("1s:chekpoint", 'unknown action "chekpoint"; did you mean "checkpoint"?'),
        ("1s:restart2", 'unknown action "restart2"'),
        ("1s:\u202erestart", 'unknown action "\\u202erestart"'),  # shown, not acted on
    ],
)
def test_an_unknown_action_is_named_whole_as_typed(text, says):
    with pytest.raises(ValueError) as raised:
        event_from_text(text)
    assert says in str(raised.value)
