"""Some fragments of a source, as a source: a pipeline over a sample of the data (``streamfeed doctor``'s epochs)."""

from __future__ import annotations

from typing import Any, Sequence

from ..core import Fragment, Source, SourceInfo


class SubsetSource:
    """Some fragments of a source, as a source: the pipeline over a sample of the data.

    Every property but the fragments, the files and the fingerprint (which
    names them, so that a cache of the subset is never taken for the
    whole's) is the source's.
    """

    def __init__(self, inner: Source, fragments: Sequence[Fragment]) -> None:
        self.inner, self.fragments = inner, tuple(fragments)

    @property
    def column_names(self) -> list[str]:
        return list(self.inner.column_names)

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(fragment.path for fragment in self.fragments))

    @property
    def row_bytes(self) -> float:
        return float(self.inner.row_bytes)

    @property
    def exact_counts(self) -> bool:
        return bool(self.inner.exact_counts)

    @property
    def read_parallelism(self) -> int | None:
        return self.inner.read_parallelism

    @property
    def read_scratch(self) -> float | None:
        return self.inner.read_scratch

    def fragment_row_bytes(self, fragment: Fragment) -> float:
        return float(self.inner.fragment_row_bytes(fragment))

    @property
    def info(self) -> SourceInfo:
        return self.inner.info

    def fingerprint(self) -> Any:
        return {"subset_of": self.inner.fingerprint(), "fragments": [fragment.key for fragment in self.fragments]}
