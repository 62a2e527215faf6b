"""seqread: the time to read a large table in full, from a cold cache ("large read time"):
plan.py declares it, workload.py runs it."""
