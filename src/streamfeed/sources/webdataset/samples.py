"""Members grouped into samples as webdataset groups them, and the checks that make a bad sample a bad unit.

The files of a tar sharing a basename form one sample, with webdataset's
rule (``base_plus_ext``): the key is the path up to the first dot of its
last component, the extension (lower-cased) everything after it; members
are grouped while consecutive members share the key, and no sample spans
two shards. Names matching ``__*__`` are webdataset's metadata and names
without a dot belong to no sample: both are left out, as webdataset does.

Refused (a bad sample, named by shard, member and byte offset): a member
whose name is absolute or climbs with ``..`` (nothing is ever extracted to
disk, but such a name in a shard is damage or an attack, not data), and two
members of one sample with the same extension (webdataset raises too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from .tarindex import Member, TarIndex

_BASE_PLUS_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")


@dataclass(frozen=True)
class Sample:
    """One sample of a shard: its key, and each extension's member."""

    key: str
    members: Mapping[str, Member]

    @property
    def header(self) -> int:
        """Byte offset of the sample's first header: where it is, for people."""
        return min(member.header for member in self.members.values())


@dataclass(frozen=True)
class BadSample:
    """A sample that cannot be served: where it is and why (reported under ``on_error="skip"``)."""

    key: str
    member: str
    offset: int
    problem: str


def _unsafe(name: str) -> bool:
    return name.startswith("/") or ".." in name.split("/")


def group(index: TarIndex) -> list[Sample | BadSample]:
    """The shard's samples in tar order; a sample with a refused member is a :class:`BadSample`."""
    out: list[Sample | BadSample] = []
    key: str | None = None
    members: dict[str, Member] = {}
    bad: BadSample | None = None

    def close() -> None:
        if key is not None:
            out.append(bad if bad is not None else Sample(key, dict(members)))

    for member in index.members:
        if "/" not in member.name and member.name.startswith("__") and member.name.endswith("__"):
            continue
        if _META.match(member.name):
            continue
        match = _BASE_PLUS_EXT.match(member.name)
        if match is None:
            continue
        prefix, extension = match.group(1), match.group(2).lower()
        if prefix != key:
            close()
            key, members, bad = prefix, {}, None
        if bad is not None:
            continue
        if _unsafe(member.name):
            bad = BadSample(prefix, member.name, member.header, "the member's name is absolute or climbs with '..'")
        elif extension in members:
            bad = BadSample(prefix, member.name, member.header, f"a second member with extension {extension!r}")
        else:
            members[extension] = member
    close()
    return out
