"""fio, the storage probe: built-in profiles, job-file builder and output parsers.

`build` and `parse` are pure; running fio is the executor's business.
"""
