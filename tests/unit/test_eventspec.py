"""`--event AT:ACTION` and a plan's `events` list: every action, its value and `for=`, exec's
quoting, and errors that say which event, which part and what is accepted."""

from __future__ import annotations

import pytest

from howfast.errors import ExitStatus, UsageError
from howfast.event_marks import EventMark, marks_from_section
from howfast.eventspec import (
    ACTIONS,
    GRAMMAR,
    EventSpec,
    event_from_table,
    event_from_text,
    ordered,
    parse_event,
    plan_event,
    step_refusals,
)


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
        ("-5s:restart", ['"-5s" is not a time into the step']),
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
        ("5s:slow-storage=5ms,for=0s", ["for=0s is not a duration"]),
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
    assert set(ACTIONS) == {
        "checkpoint", "restart", "crash", "failover", "delete-pod", "move", "drain",
        "slow-storage", "cap-iops", "exec",
    }  # fmt: skip
    for syntax in ACTIONS.values():
        assert syntax.usage in GRAMMAR
    assert {a for a, s in ACTIONS.items() if s.disturbs_service} == {
        "restart", "crash", "failover", "delete-pod", "move", "drain",
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
    assert back.disturbs_service
    assert not EventMark(2, "5s:checkpoint", "checkpoint", 5.0).disturbs_service
    assert marks_from_section(None) == () and marks_from_section("x") == ()
