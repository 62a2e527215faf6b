"""One finding of `howfast doctor`: what was checked, whether it is there, and what is lost
without it. The doctor (service/doctor.py), the target kinds' own checks and the install hints make
and read them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from howfast.model import JSONValue


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    disables: str | None = None  # what does not work without it
    hint: str | None = None  # how to get it
    required: bool = False

    def as_dict(self) -> dict[str, JSONValue]:
        return asdict(self)
