"""``streamfeed bench``'s verdict on what limits the reads, through the real console script (issue 23, item 4).

A gzip-compressed HDF5 file that was just written is in the page cache: its
reads cost decompression (h5py serialises every call through one lock, so
four read threads spend most of their time off the CPU, waiting for it), not
the disk. The verdict was "the disk is the limit" with advice for network
storage; it must name decoding, as ``doctor`` does, and give no network
advice for a local file. No timing is asserted: only which limit is named.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
from _console import streamfeed

ROWS = 12_000


def _compressed_images(path) -> None:
    rng = np.random.default_rng(0)
    images = (rng.random((ROWS, 32, 32)) * 40).astype(np.uint8) + np.arange(32, dtype=np.uint8)[None, None, :] * 6
    with h5py.File(path, "w") as out:
        out.create_dataset("images", data=images, compression="gzip", chunks=(200, 32, 32))
        out.create_dataset("labels", data=rng.integers(0, 10, ROWS), compression="gzip")
    with open(path, "rb") as handle:  # read once: every page of it is in the page cache
        while handle.read(1 << 20):
            pass


def _bench(path, *args: str) -> str:
    proc = streamfeed("bench", path, "--read-threads", "4", "--seconds", "0", "--max-batches", "30", "--quiet", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_compressed_hdf5_file_in_the_page_cache_is_decode_bound_and_gets_no_network_advice(tmp_path):
    path = tmp_path / "images.h5"
    _compressed_images(path)
    report = json.loads(_bench(path, "--json"))
    assert report["bottleneck"] == "read", report["verdict"]
    assert "disk is the limit" not in report["verdict"], report["verdict"]
    assert report["verdict"].startswith("reading and decoding is the limit"), report["verdict"]
    assert report["read_limit"] == "decode", (report["verdict"], report["advice"])
    assert not any("network" in line for line in report["advice"]), report["advice"]
    text = _bench(path)
    (verdict,) = [line for line in text.splitlines() if line.startswith("verdict:")]
    assert "decoding is the limit" in verdict and "disk is the limit" not in text, text
    assert "network" not in text, text
