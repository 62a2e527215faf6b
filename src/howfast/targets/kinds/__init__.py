"""Target kinds: one module each, defining `KIND` (targets/registry.py): how a `--target`
text is recognised, and how its Target is made."""
