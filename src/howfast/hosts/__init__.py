"""Hosts: where tools run and what the machine behind a target is.

A workload builds pure `Invocation`s; the target supplies a `Host` that runs them and answers
facts (cores, memory, devices by role, whether caches can be dropped). `LocalHost` runs child
processes on this machine; `ClientHost` runs them here for a server that lives elsewhere and
says what it cannot know about that server's machine.
"""

from howfast.hosts.base import Host, Invocation, ToolResult
from howfast.hosts.local import ClientHost, LocalHost

__all__ = ["ClientHost", "Host", "Invocation", "LocalHost", "ToolResult"]
