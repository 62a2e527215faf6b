"""What killed local runs left on this machine, found by howfast's marks only, and removed.

A run that ends in any way howfast sees (completion, an error, Ctrl-C, SIGTERM) takes down
what it built. One killed with SIGKILL (the OOM killer, a test's time-out) cannot: its
clusters, emulated volumes, private directories and cgroups stay, and sometimes its server.

- `marks.py`: the marks howfast leaves on what it creates so that a later howfast can tell
  whose it is (the owner record of a private directory, the kept mark of a --keep cluster).
- `registry.py`: this machine's registry, where each howfast process records what it owns
  before it makes it (directories, cgroups, its servers' shared memory), for what no process
  or name points at any more.
- `machine.py`: reads this machine (processes, mounts, loop devices, locks, directories).
- `groups.py`: pure: from what was read, each run's leftovers, and whether its howfast is gone.
- `find.py`: pure: each leftover as the user sees it, with the actions that take it down.
- `remove.py`: takes them down, in the order that leaves nothing behind.
- `killed.py`: what a run removes itself of a server it killed (its recorded shared memory),
  with remove.py's actions; `dsm_control.py`: the segments a control segment lists.
"""
