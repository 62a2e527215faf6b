"""Standbys of a primary howfast creates (issue 28): the design asked (`spec.py`), pure
builders of the commands and settings (`builders.py`), what pg_stat_replication says
(`state.py`), standbys on this machine (`local.py`) and the orchestration every kind shares
(`set.py`). docs/replication.md."""
