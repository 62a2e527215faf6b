"""An instance's metrics endpoint read as a Prometheus source (samplers/instance_metrics.py):
the `cnpg_` counters and how far they moved. HAND-MADE exposition text
(tests/data/cnpg/handmade/metrics-pg-1.txt), parsed by prometheus_client's real parser."""

from __future__ import annotations

from howfast.samplers.instance_metrics import counter_values, moved
from tests.unit.cnpg_objects import HANDMADE


def test_the_cnpg_counters_by_name_and_labels_gauges_and_go_s_left_out() -> None:
    values = counter_values((HANDMADE / "metrics-pg-1.txt").read_text())
    # named as prometheus_client's parser names a counter's samples (OpenMetrics: _total)
    assert values == {
        'cnpg_pg_stat_database_xact_commit_total{datname="app"}': 120.0,
        'cnpg_pg_stat_database_xact_commit_total{datname="howfast_1a2b3c4d"}': 5000.0,
        "cnpg_pg_stat_bgwriter_buffers_alloc_total": 900.0,
    }


def test_what_moved_during_the_step_and_not_what_was_reset_or_new() -> None:
    before = {"a": 10.0, "b": 5.0, "c": 7.0}
    after = {"a": 25.5, "b": 5.0, "c": 1.0, "d": 3.0}
    assert moved(before, after) == {"a": 15.5}
