"""howfast's figures as Prometheus metrics: served live while a run lasts (`run --metrics-port`),
or written for a finished run in node_exporter's textfile-collector format (`export
prometheus`). Both go through one set of metric families (families.py), so that a dashboard
reads the same names and labels from either. See docs/prometheus.md."""
