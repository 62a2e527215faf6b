"""`cnpg://[NAMESPACE/]CLUSTER`: a CloudNativePG cluster someone already runs, benchmarked
in a database of howfast's own and failed over through the operator (docs/cloudnative-pg.md).
Pure builders and parsers (spec, discovery, credentials, database, client, operator,
timeline), thin executors (api, target, ops)."""
