"""pgbench: argv builders, output parsers (parse: text output; txlog: per-transaction logs) and
the thin executor."""
