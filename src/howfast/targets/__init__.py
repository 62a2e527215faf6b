"""Targets: where PostgreSQL runs and keeps its data (local directory, existing server)."""
