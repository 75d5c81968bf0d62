"""gs:// objects for the file readers: gcsfs, its retries ours, every ranged GET pinned to the generation seen at open.

gcsfs's ``GCSFileSystem`` (its core class: the "extended" one gcsfs exports
by default first asks a gRPC control API for the bucket's type, 60 s per
bucket against anything but Google, an emulator included) with

* its own retry loop (6 tries, sleeps to 32 s, fixed when gcsfs is
  imported) taken out of ``_request``: ``files/retry.py`` retries to the
  deadline instead, as for S3, and a try is cut by ``read_timeout``;
* :meth:`GcsFiles.pinned_range`: a ranged GET of the object's generation as
  ``info`` saw it at open (``generation=`` and ``ifGenerationMatch=``): GCS
  answers 404 when that generation is gone (overwritten, in a bucket that
  keeps no versions) and 412 when the object is another generation, and the
  answer's ``x-goog-generation`` and ``Content-Range`` size are checked too:
  any of them is :class:`~streamfeed.files.http.VersionChanged`, raised by
  the storage layer as ``ObjectChangedError``. The generation and the ETag
  are the object's version in the fingerprint (``object_version``).

The emulator the tests run (``gcp-storage-emulator``) ignores both
parameters and sends no generation header, so there only the size of an
overwrite can be told; the tests check that every GET carries them.
"""

from __future__ import annotations

from typing import Any, Mapping

import aiohttp
from gcsfs.core import GCSFileSystem

from .http import HttpBusy, VersionChanged

# gcsfs's _request without its retry_request decorator (the decorator package keeps the function)
_UNRETRIED = GCSFileSystem._request.__wrapped__


class GcsFiles(GCSFileSystem):
    """gcsfs with one try a request (the retries are ``files/retry.py``'s) and :meth:`pinned_range`."""

    def __init__(self, *, connect_timeout: float, read_timeout: float, **arguments: Any) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        super().__init__(requests_timeout=timeout, skip_instance_cache=True, **arguments)

    async def _request(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        return await _UNRETRIED(self, method, path, *args, **kwargs)

    @staticmethod
    def version_text(info: Mapping[str, Any]) -> str:
        """The version taken at open, in words (for messages)."""
        return f"generation {info.get('generation')}, ETag {info.get('etag')}"

    async def pinned_range(self, path: str, start: int, end: int, info: Mapping[str, Any]) -> bytes:
        """Bytes ``start:end`` of the generation ``info`` (taken at open) names, in one ranged GET."""
        generation = info.get("generation")
        conditions = {"ifGenerationMatch": generation} if generation else {}
        try:
            _, headers, _, data = await self._request(
                "GET",
                self.url(path, generation=generation),
                headers={"Range": f"bytes={start}-{end - 1}"},
                **conditions,
            )
        except FileNotFoundError:
            raise VersionChanged("none: that generation is gone (404: overwritten or removed)") from None
        except FileExistsError:  # gcsfs's name for a 412
            raise VersionChanged("another generation (412 Precondition Failed)") from None
        answered = headers.get("x-goog-generation")
        if generation and answered and str(answered) != str(generation):
            raise VersionChanged(f"generation {answered}")
        total = headers.get("Content-Range", "").rsplit("/", 1)[-1]
        if total.isdigit() and int(total) != int(info["size"]):
            raise VersionChanged(f"an object of {total} bytes, not {info['size']}")
        if len(data) != end - start:
            raise HttpBusy(f"{len(data)} of {end - start} bytes from gs://{path}")
        return data
