"""Pure builders for standbys: the base backup's argv, a standby's settings, the primary's
replication settings, the SQL that reads and sets replication. Tested on their output."""

from __future__ import annotations

from pathlib import PurePath

from howfast.targets.base import Connection
from howfast.targets.replicas.spec import ReplicaSpec

GIB = 1024**3
MAX_SLOT_KEEP_BYTES = 4 * GIB
SLOT_KEEP_SHARE = 0.25  # of the free space of the primary's WAL filesystem


def basebackup_argv(
    pg_basebackup: str, primary: Connection, data_dir: PurePath, slot: str
) -> list[str]:
    """A base backup that streams the WAL written meanwhile (-X stream: no gap) after a fast
    checkpoint, creating the slot that keeps the primary's WAL from the backup's start (-C -S).
    Over the primary's socket locally: no TCP, no password (initdb's pg_hba trusts local
    replication). No -R: howfast writes its own, minimal primary_conninfo. --no-sync: the
    standby's first start syncs its whole data directory anyway (the copied pg_control says
    the server was running, so PostgreSQL's start-up treats it as after a crash and syncs
    every file before recovery), and a copy that never started is never used: syncing each
    file here too did that work twice (about 5 s per standby on a 2 ms emulated volume)."""
    return [
        pg_basebackup,
        "-D",
        str(data_dir),
        "-h",
        primary.host,
        "-p",
        str(primary.port),
        "-U",
        primary.user,
        "-X",
        "stream",
        "-c",
        "fast",
        "-C",
        "-S",
        slot,
        "--no-password",
        "--no-sync",
    ]


def conninfo_value(value: str) -> str:
    """One libpq conninfo value, quoted when it needs to be."""
    if value and not any(c in value for c in " '\\="):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def primary_conninfo(name: str, primary: Connection, passfile: str | None = None) -> str:
    """How a standby reaches its primary; never a password (a passfile, when one is needed)."""
    parts = {
        "host": primary.host,
        "port": str(primary.port),
        "user": primary.user,
        "application_name": name,
    }
    if passfile:
        parts["passfile"] = passfile
    return " ".join(f"{k}={conninfo_value(v)}" for k, v in parts.items())


def standby_conf(
    name: str,
    port: int,
    socket_dir: str,
    primary: Connection,
    passfile: str | None = None,
    listen_addresses: str = "",
    syncfs: bool = False,
) -> dict[str, str]:
    """The settings a base backup's copy needs to run as standby `name`. The copied
    postgresql.auto.conf may hold the primary's ALTER SYSTEM values: synchronous_standby_names
    is emptied here, since a standby promoted with it would wait for itself. `syncfs`
    (PostgreSQL 14 and later): its start-up sync of the data directory as one syncfs() of
    its filesystem (recovery_init_sync_method) instead of an fsync per file, each a flush of
    the device: 4 to 5 s per start on a 2 ms emulated volume."""
    sync_method = {"recovery_init_sync_method": "syncfs"} if syncfs else {}
    return {
        **sync_method,
        "port": str(port),
        "unix_socket_directories": socket_dir,
        "listen_addresses": listen_addresses,
        "hot_standby": "on",
        "primary_conninfo": primary_conninfo(name, primary, passfile),
        "primary_slot_name": name,
        "synchronous_standby_names": "",
    }


def slot_keep_bytes(free_bytes: int | None) -> int:
    """max_slot_wal_keep_size: a standby that dies cannot fill the storage under test."""
    if free_bytes is None:
        return MAX_SLOT_KEEP_BYTES
    return max(64 * 1024**2, min(MAX_SLOT_KEEP_BYTES, int(free_bytes * SLOT_KEEP_SHARE)))


def primary_replication_settings(spec: ReplicaSpec, keep_bytes: int) -> dict[str, str]:
    """What the primary's postgresql.conf needs before its standbys are built."""
    senders = str(max(10, spec.count + 2))
    return {
        "wal_level": "replica",
        "max_wal_senders": senders,
        "max_replication_slots": senders,
        "max_slot_wal_keep_size": f"{keep_bytes // 1024**2}MB",
    }


def make_synchronous_sql(spec: ReplicaSpec) -> list[str]:
    """The statements that put the design in force on the primary (then a reload)."""
    names = spec.synchronous_standby_names.replace("'", "''")
    return [
        f"ALTER SYSTEM SET synchronous_standby_names = '{names}'",
        f"ALTER SYSTEM SET synchronous_commit = '{spec.synchronous_commit}'",
        "SELECT pg_reload_conf()",
    ]


RELEASE_SQL = (
    "ALTER SYSTEM RESET synchronous_standby_names",
    "ALTER SYSTEM RESET synchronous_commit",
    "SELECT pg_reload_conf()",
)

# One row per walsender, LSNs as numbers (bytes since 0/0), lags in milliseconds (NULL: no
# measurement, idle or just after a change: never 0).
STATE_COLUMNS = (
    "application_name",
    "state",
    "sync_state",
    "sync_priority",
    "sent_lsn",
    "write_lsn",
    "flush_lsn",
    "replay_lsn",
    "write_lag_ms",
    "flush_lag_ms",
    "replay_lag_ms",
    "current_lsn",
)
STATE_QUERY = (
    "SELECT application_name, state, sync_state, sync_priority, "
    "pg_wal_lsn_diff(sent_lsn, '0/0')::bigint, pg_wal_lsn_diff(write_lsn, '0/0')::bigint, "
    "pg_wal_lsn_diff(flush_lsn, '0/0')::bigint, pg_wal_lsn_diff(replay_lsn, '0/0')::bigint, "
    "extract(epoch FROM write_lag) * 1000, extract(epoch FROM flush_lag) * 1000, "
    "extract(epoch FROM replay_lag) * 1000, "
    "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint "
    "FROM pg_catalog.pg_stat_replication ORDER BY application_name"
)
SLOTS_QUERY = (
    "SELECT slot_name, coalesce(wal_status, '') FROM pg_catalog.pg_replication_slots "
    "WHERE slot_type = 'physical' ORDER BY slot_name"
)
