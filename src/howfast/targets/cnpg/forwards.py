"""howfast's own SQL to a CloudNativePG instance: a port-forward from 127.0.0.1 here to the
instance pod's 5432 (never a Service: it must reach the instance it names), one per
instance asked, and what the instance says when asked whether it serves as a primary."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace

from howfast.errors import HowfastError
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.cnpg.ops import Serving
from howfast.targets.k8s.cluster import Cluster, PortForward

POSTGRES_PORT = 5432
SERVING_QUERY = (
    "SELECT pg_is_in_recovery(), pg_postmaster_start_time()::text, "
    "(SELECT timeline_id FROM pg_control_checkpoint())"
)
# The primary's view of each standby (CloudNativePG names them by instance in
# application_name); the LSNs are NULL for a user without pg_monitor: lag unknown
LAG_QUERY = (
    "SELECT application_name, pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::bigint "
    "FROM pg_stat_replication"
)


FOLLOWING = ""  # the key of the forward that follows the primary (no instance is named "")


class InstanceForwards:
    """Forwards to the instances' pods, made when first asked, closed together."""

    def __init__(self, cluster: Cluster, namespace: str, login: Connection) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.login = login  # user, password, database; host and port replaced per instance
        self._forwards: dict[str, PortForward] = {}
        self._lock = threading.Lock()

    def connection(self, instance: str, dbname: str | None = None) -> Connection:
        with self._lock:
            forward = self._forwards.get(instance)
            if forward is None:
                forward = PortForward(
                    self.cluster, self.namespace, instance, PortForward.reserve(), POSTGRES_PORT
                )
                forward.start()
                self._forwards[instance] = forward
        return replace(
            self.login, host="127.0.0.1", port=forward.port, dbname=dbname or self.login.dbname
        )

    def following(self, primary_now: Callable[[], str], dbname: str) -> Connection:
        """A forward that dials whichever instance `primary_now()` names as each connection
        opens: howfast's own SQL follows the operator's primary (the rows counted after a
        failover are the surviving primary's)."""
        with self._lock:
            forward = self._forwards.get(FOLLOWING)
            if forward is None:
                forward = PortForward(
                    self.cluster, self.namespace, primary_now, PortForward.reserve(), POSTGRES_PORT
                )
                forward.start()
                self._forwards[FOLLOWING] = forward
        return replace(self.login, host="127.0.0.1", port=forward.port, dbname=dbname)

    def serving(self, instance: str) -> Serving | None:
        """What `instance` says of itself; None when it does not answer (within 3 s)."""
        try:
            with pgquery.connect(self.connection(instance), timeout_s=3) as db:
                row = db.execute(SERVING_QUERY).fetchone()
        except HowfastError:
            return None
        except Exception:  # psycopg's errors while the server goes away
            return None
        if row is None:
            return None
        return Serving(instance, bool(row[0]), str(row[1]), int(str(row[2])))

    def lags(self, primary: str) -> Mapping[str, int | None]:
        try:
            with pgquery.connect(self.connection(primary), timeout_s=3) as db:
                rows = db.execute(LAG_QUERY).fetchall()
        except Exception:
            return {}
        return {str(r[0]): (None if r[1] is None else int(str(r[1]))) for r in rows}

    def metrics(self, instance: str, port: int) -> str:
        """GET /metrics of the instance's exporter, through a forward made for it (3 s)."""
        import urllib.request

        forward = PortForward(self.cluster, self.namespace, instance, PortForward.reserve(), port)
        forward.start()
        try:
            url = f"http://127.0.0.1:{forward.port}/metrics"  # loopback: the forward's end
            with urllib.request.urlopen(url, timeout=3) as answer:
                return str(answer.read().decode("utf-8", "replace"))
        finally:
            forward.close()

    def close(self) -> None:
        with self._lock:
            for forward in self._forwards.values():
                with contextlib.suppress(Exception):
                    forward.close()
            self._forwards.clear()
