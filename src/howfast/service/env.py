"""What the services take of the environment they run in (the CLI's: cli/context.py). Apart
from the requests (requests.py): every command builds one, and most (results, compare,
export...) need nothing else of the service layer, nor the design and SLO types the requests
load."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from howfast.cancel import CancelToken
from howfast.clock import SYSTEM_CLOCK, Clock


@dataclass(frozen=True)
class ServiceEnv:
    """What the services take of the environment they run in (the CLI's: cli/context.py)."""

    store_url: str | None = None  # None: environ's $HOWFAST_STORE, else the default file
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    clock: Clock = SYSTEM_CLOCK  # stored timestamps
    info: Callable[[str], None] = lambda text: None  # a line for people (stderr)
    # Cancelled: the run stops as on Ctrl-C (from another thread; signal handlers are only
    # installed when the run is driven from the main thread). None: the run's own token.
    cancel: CancelToken | None = None
