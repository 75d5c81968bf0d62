"""The row count at open: the parallel scan over byte ranges agrees with the sequential one, and shows progress.

``scan_ranges`` reads and indexes blocks in threads and feeds them in
file order (issue 27: the count at the disk's speed); whatever the
threads and block size, it must give the very records, splits, lines,
too-long records and quote errors that ``scan_stream`` gives.
"""

from __future__ import annotations

import io
import logging
import random
import threading

import pytest

from streamfeed.readers import read_csv
from streamfeed.sources.csv import progress as csv_progress
from streamfeed.sources.csv.progress import count_progress
from streamfeed.sources.csv.scan import Scanner, UnbalancedQuote, scan_ranges, scan_stream, too_long


def _fields(scanner: Scanner) -> tuple:
    return (
        scanner.rows,
        [split.to_list() for split in scanner.splits],
        scanner.header_end,
        scanner.header_lines,
        scanner.quoted_newlines,
        scanner.lines_before,
        scanner.offset,
        too_long(scanner),
    )


SCANNERS = {
    # the open's scan, with records "too long" at 25 bytes: blocks of more than that are never plain
    "long records": {"split_bytes": 60, "collect": True, "longer_than": 25},
    # splits and long records of more than a block: plain blocks take the summary's fast path
    "splits": {"split_bytes": 300, "collect": True, "longer_than": 4096},
    "count only": {"header": False},
}


def _scanner(kind: str) -> Scanner:
    return Scanner(quote=ord('"'), delimiter=ord(","), data_start=0, **SCANNERS[kind])


def _sequential(data: bytes, block: int, kind: str) -> tuple:
    try:
        return _fields(scan_stream(io.BytesIO(data).read, _scanner(kind), block))
    except UnbalancedQuote as exc:
        return ("UnbalancedQuote", exc.line, str(exc))


def _parallel(data: bytes, block: int, threads: int, kind: str) -> tuple:
    def read_at(offset: int, length: int) -> bytes:
        return data[offset : offset + length]

    try:
        return _fields(scan_ranges(read_at, len(data), _scanner(kind), threads=threads, block_bytes=block))
    except UnbalancedQuote as exc:
        return ("UnbalancedQuote", exc.line, str(exc))


def _memoryview_scan(data: bytes, block: int, kind: str) -> tuple:
    """The scan without the summary's fast path (a memoryview block is always indexed in full)."""
    stream = io.BytesIO(data)
    try:
        return _fields(scan_stream(lambda size: memoryview(stream.read(size)), _scanner(kind), block))
    except UnbalancedQuote as exc:
        return ("UnbalancedQuote", exc.line, str(exc))


def _random_csv(rng: random.Random) -> bytes:
    quoted = ['"a\nb"', '"x,y"', '"say ""hi"""', '"' + "long " * 12 + '\nvalue"', '"\r\n"', '""']
    plain = ["1.5", "-2", "abc", "", "a" * 30]
    bad = ['5" screen', '"open']  # a quote inside an unquoted field; one never closed
    lines = [b"h1,h2,h3"]
    for _ in range(rng.randint(0, 40)):
        pool = plain + (quoted if rng.random() < 0.3 else []) + (bad if rng.random() < 0.01 else [])
        lines.append(",".join(rng.choice(pool) for _ in range(3)).encode())
        if rng.random() < 0.05:
            lines.append(b"")  # an empty line: not a record
    ending = rng.choice([b"\n", b"\r\n"])
    return ending.join(lines) + rng.choice([b"", ending, ending * 2])


def test_parallel_scan_agrees_with_the_sequential_scan_on_random_files(monkeypatch):
    plain_blocks = 0
    feed_plain = Scanner._feed_plain

    def counted(self, *args):
        nonlocal plain_blocks
        plain_blocks += 1
        feed_plain(self, *args)

    monkeypatch.setattr(Scanner, "_feed_plain", counted)
    rng = random.Random(27)
    seen = {"quoted newlines": 0, "quote errors": 0, "long": 0, "empty lines": 0}
    for trial in range(60):
        data = _random_csv(rng) * rng.choice([1, 1, 4])
        for kind in SCANNERS:
            for block in (1, 7, 64, 128, 4096) if trial < 8 else (7, 64, 128, 4096):
                expected = _memoryview_scan(data, block, kind)
                assert _sequential(data, block, kind) == expected, (trial, kind, block, data)
                for threads in (1, 3):
                    assert _parallel(data, block, threads, kind) == expected, (trial, kind, block, threads, data)
        whole = _sequential(data, 4096, "long records")
        if whole[0] == "UnbalancedQuote":
            seen["quote errors"] += 1
        else:
            seen["quoted newlines"] += whole[4]
            seen["long"] += bool(whole[7])
        seen["empty lines"] += b"\n\n" in data or b"\n\r\n" in data
    assert all(count > 2 for count in seen.values()), seen  # every case was exercised
    assert plain_blocks > 500  # and the summary's fast path


def test_parallel_scan_finds_the_same_fragments_when_opening_a_file(tmp_path):
    rng = random.Random(5)
    path = tmp_path / "data.csv"
    values = ["a", "b,c", "d\ne", "f"]
    rows = [f'{i},"{rng.choice(values)}",{i / 3}' for i in range(20_000)]
    path.write_bytes(("id,s,x\n" + "\n".join(rows) + "\n").encode())
    data = read_csv(path, fragment_bytes=10_000, count_cache=False)
    scanner = Scanner(quote=ord('"'), delimiter=ord(","), split_bytes=10_000)
    with open(path, "rb") as handle:
        expected = scan_stream(handle.read, scanner, 1 << 20)
    assert data.num_rows() == expected.rows == 20_000
    assert [(f.start, f.end, f.num_rows, f.first_line) for f in data.source.fragments] == [
        (s.start, s.end, s.rows, s.first_line) for s in expected.splits
    ]


def test_a_file_shorter_than_at_open_raises_and_leaves_no_thread():
    data = b"a,b\n" + b"1,2\n" * 1000

    def read_at(offset: int, length: int) -> bytes:
        return data[offset : offset + length]

    with pytest.raises(OSError, match="ended at byte"):
        scan_ranges(read_at, len(data) + 100, Scanner(quote=None, delimiter=ord(",")), threads=2, block_bytes=64)
    with pytest.raises(UnbalancedQuote):
        bad = data + b'3,4" inch\n' + data
        scan_ranges(lambda o, n: bad[o : o + n], len(bad), Scanner(quote=34, delimiter=44), threads=2, block_bytes=64)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("streamfeed-csv-scan")]


def test_counting_a_file_reports_its_progress_to_a_callback_and_the_log(tmp_path, monkeypatch, caplog):
    path = tmp_path / "big.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 1_000_000)  # 4 MB: four blocks of the scan
    size = path.stat().st_size
    calls: list[tuple[str, int, int]] = []
    monkeypatch.setattr(csv_progress, "LOG_EVERY_SECONDS", 0.0)  # log at every block
    with caplog.at_level(logging.INFO, logger="streamfeed"), count_progress(lambda *args: calls.append(args)):
        data = read_csv(path, count_cache=False)
    assert data.num_rows() == 1_000_000
    assert [call[0] for call in calls] == [str(path)] * len(calls) and len(calls) >= 4
    scanned = [call[1] for call in calls]
    assert scanned == sorted(scanned) and scanned[-1] == size and {call[2] for call in calls} == {size}
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith(f"counting the rows of {path}: ") and "%" in message for message in messages)
    assert any(message.startswith(f"counted 1000000 rows of {path}") for message in messages)
    calls.clear()
    read_csv(path, count_cache=False)  # outside the block: no callback
    assert calls == []
