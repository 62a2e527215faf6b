"""Analysis: derive tables and verdicts from stored runs. Returns data; reports format it."""
