"""Target kinds: one module each, defining `KIND` (targets/kind.py): how a `--target`
text is recognised, and how its Target is made."""
