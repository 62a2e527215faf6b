"""Hosts: where tools run and what the machine behind a target is.

A workload builds pure `Invocation`s (base.py); the target supplies a `Host` that runs them and
answers facts (cores, memory, devices by role, whether caches can be dropped). `LocalHost`
(local.py) runs child processes on this machine; `ClientHost` runs them here for a server that
lives elsewhere and says what it cannot know about that server's machine. Nothing is imported
here: a module takes what it uses from its own module (a dry run needs no LocalHost).
"""
