"""Emulated volumes: a local target whose storage is a block device howfast builds, with added
latency and optional IOPS/bandwidth caps, to ask "what if my storage were slower?".

build.py holds the pure builders (argv lists, the device-mapper table, cgroup lines),
volume.py the thin executor that assembles and tears the layers down, target.py the Target
that puts a throwaway cluster on top.
"""
