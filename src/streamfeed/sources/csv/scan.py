"""The quote-aware newline scan behind the CSV source's exact row counts.

A CSV record ends at a newline that is not inside a quoted field. Inside
quotes the number of quote characters seen so far is odd (an escaped quote
``""`` adds two and keeps the parity), so a newline ends a record exactly
when the count of quotes before it is even. That is a vectorised NumPy
computation over byte blocks: find the quotes and the newlines, rank
the newlines among the quotes, keep the even ones (in blocks of 1 MiB: ``BLOCK_BYTES``). Empty lines are not
records (pyarrow skips them), so they are left out of the count too.

Quote parity agrees with pyarrow only if quotes open fields: ``5" screen``
(a quote in the middle of an unquoted field) is literal text to pyarrow but
would flip the parity here, so such a quote is reported as an error naming
its line instead of giving a wrong count.

Most blocks hold only plain records; for those the scanner adds the counts
of a bit-mask summary (``summary.py``) instead of finding every newline and
quote, and a file that can be read at any offset is summarised in threads
(:func:`scan_ranges`), the counts added in file order, so the result is the
sequential scan's.

The same scanner, fed one fragment's bytes, maps record numbers to physical
line numbers for error messages (records may span lines), and finds the
records too long for pyarrow's parse blocks, so that a fragment can be
parsed around them (``long_records``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...errors import FileChangedError, describe
from .summary import BlockSummary, byte_mask, summarize

NEWLINE, CR = 10, 13
BLOCK_BYTES = 1 << 20
"""Blocks of the open's scan. Small blocks bound what the scan holds (two blocks and a mask of one, 3 MiB,
whatever the lines' lengths; 48 MiB at 16 MiB blocks) and are faster, the block and its masks staying in the
CPU's cache: the scan of a 230 MB file of floats takes 0.14-0.16 s at 1 MiB, 0.18-0.19 s at 4 and 0.20-0.26 s at
16 MiB."""
_FIND_BLOCK_BYTES = 1 << 20  # long_records: blocks of an in-memory fragment
TASK_BLOCKS = 4  # scan_ranges: blocks a thread reads and indexes per task (a future per block: 4 % of the scan)


class UnbalancedQuote(ValueError):
    """A quote opens a field in the middle of unquoted text, or never closes."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Split:
    """A byte range of whole records: ``[start, end)``, its rows and first line."""

    start: int
    end: int
    rows: int
    first_line: int  # 1-based physical line of the byte at ``start``
    first_row: int  # data rows of the file before this range

    def to_list(self) -> list[int]:
        return [self.start, self.end, self.rows, self.first_line, self.first_row]


@dataclass(frozen=True)
class BlockIndex:
    """What the scan of a block needs from the block alone (and its offset): computed in any thread.

    The byte passes are 80 % of the scan and depend on no state carried
    from the blocks before, so :func:`scan_ranges` computes them for
    several blocks at once in threads (NumPy releases the GIL) and
    :meth:`Scanner.feed` only combines them with that state, in order.
    ``summary`` (``summary.py``) serves most blocks; the positions of the
    newlines and quotes, and each newline's rank among the quotes, are
    found only for the blocks it does not (``newlines`` None: not yet).
    """

    summary: BlockSummary | None
    newlines: np.ndarray | None = None
    after_cr: np.ndarray | None = None  # whether the byte before each newline is a CR (at the block's byte 0: False)
    quotes: np.ndarray | None = None  # None: the block holds no quote character (or quoting is off)
    rank: np.ndarray | None = None  # the quotes before each newline
    bad: tuple[int, int] = (-1, -1)  # by the parity at the block's start: the first misplaced opening quote, or -1


def index_block(
    block: bytes | memoryview,
    *,
    quote: int | None,
    delimiter: int,
    base: int,
    data_start: int,
    summary: bool = True,
) -> BlockIndex:
    """The :class:`BlockIndex` of ``block``, which starts at byte ``base`` of the stream.

    With ``summary``, a block that the summary shows plain at some parity
    (the usual case) is not indexed further. A quote at the block's first byte
    is checked by the scanner, against the byte before the block.
    """
    found = summarize(block, quote=quote, delimiter=delimiter) if summary else None
    if found is not None and any(found.plain):  # plain at parity 0, or inside a field that began before it
        return BlockIndex(found)
    buf = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(byte_mask(buf, NEWLINE))
    after_cr = buf[np.maximum(newlines - 1, 0)] == CR
    if newlines.size and newlines[0] == 0:
        after_cr[0] = False  # the scanner looks at the block before's last byte
    # A block without a quote character is scanned as a file without quoting is: ``bytes.find`` (memchr) instead
    # of the quote pass, 16 ms instead of 29 per 16 MiB of numbers.
    if quote is None or not _has_byte(block, quote):
        return BlockIndex(found, newlines, after_cr)
    quotes = np.flatnonzero(byte_mask(buf, quote))
    if not quotes.size:
        return BlockIndex(found, newlines, after_cr, quotes)
    before = buf[np.maximum(quotes - 1, 0)]
    # after a quote: the second quote of an escaped pair ``""`` inside a quoted field
    ok = (before == delimiter) | (before == NEWLINE) | (before == CR) | (before == quote)
    ok |= quotes + base == data_start
    ok[0] |= quotes[0] == 0
    bad = []
    for parity in (0, 1):  # at parity p the quotes numbered p, p + 2, ... open fields
        opening = ok[parity::2]
        bad.append(-1 if opening.all() else parity + 2 * int(np.argmin(opening)))
    return BlockIndex(found, newlines, after_cr, quotes, np.searchsorted(quotes, newlines), (bad[0], bad[1]))


@dataclass
class Scanner:
    """Feeds blocks of one stream; counts records, finds split points.

    ``header``: the first non-empty record is the header, not a data row;
    ``split_bytes``: also cut the data into ranges of about that many bytes
    at record boundaries; ``collect``: keep every record's start offset and
    line (for one fragment's error messages, never for a whole file), or with
    ``longer_than`` only those of records of more bytes than that, with their
    ends and record numbers.
    """

    quote: int | None
    delimiter: int
    header: bool = True
    split_bytes: int | None = None
    collect: bool = False
    longer_than: int | None = None  # collect: only records of more bytes (without the line end)
    data_start: int = 0  # offset where a field may open at the start (after a BOM)

    offset: int = 0  # bytes fed so far
    lines_before: int = 0  # newlines fed so far
    parity: int = 0
    last_term: int = -1  # absolute offset of the last line terminator (any line)
    last_byte: int = NEWLINE
    record_line: int = 1  # 1-based line of the byte after ``last_term``
    rows: int = 0  # data records (header excluded)
    header_end: int | None = None  # offset just after the header record
    header_lines: int = 0
    quoted_newlines: bool = False
    splits: list[Split] = field(default_factory=list)
    _split_start: int | None = None
    _split_rows_before: int = 0
    _split_line: int = 1
    starts: list[np.ndarray] = field(default_factory=list)  # collect: record starts
    lines: list[np.ndarray] = field(default_factory=list)  # collect: their 1-based lines
    ends: list[np.ndarray] = field(default_factory=list)  # longer_than: offsets of their line ends
    numbers: list[np.ndarray] = field(default_factory=list)  # longer_than: their 1-based record numbers
    end_lines: list[np.ndarray] = field(default_factory=list)  # longer_than: lines of their line ends

    def feed(self, block: bytes | memoryview, index: BlockIndex | None = None) -> None:
        """Scans the next block; ``index``: its :func:`index_block` at this offset, computed in another thread."""
        buf = np.frombuffer(block, dtype=np.uint8)
        if buf.size == 0:
            return
        base = self.offset
        if index is None:
            index = self.index(block, base)
        first_content = self._plain(index.summary, buf)
        if first_content is not None:
            assert index.summary is not None
            self._feed_plain(index.summary, buf, first_content)
            return
        if index.newlines is None:
            index = self.index(block, base, summary=False)
        newlines, quotes, after_cr = index.newlines, index.quotes, index.after_cr
        assert newlines is not None and after_cr is not None
        terms = newlines
        if quotes is not None and quotes.size:
            self._check_openings(buf, index, base)
            assert index.rank is not None
            outside = ((self.parity + index.rank) & 1) == 0
            if not outside.all():
                terms, after_cr = newlines[outside], after_cr[outside]
                self.quoted_newlines = True
            self.parity ^= quotes.size & 1
        elif self.quote is not None and self.parity:  # the whole block lies inside one quoted field
            terms = newlines[:0]
            self.quoted_newlines = self.quoted_newlines or bool(newlines.size)
        if terms.size:
            prev = np.empty(terms.size, dtype=np.int64)
            prev[0] = self.last_term - base
            prev[1:] = terms[:-1]
            content = terms - prev - 1 - after_cr
            if terms[0] == 0 and self.last_byte == CR:
                content[0] -= 1
            filled = content > 0
            if filled.all():  # no empty line: most blocks, without the two selections
                self._take_records(terms, prev + 1, newlines, base)
            else:
                self._take_records(terms[filled], prev[filled] + 1, newlines, base)
            self.last_term = base + int(terms[-1])
            self.record_line = 2 + self.lines_before + int(np.searchsorted(newlines, terms[-1]))
        self.lines_before += newlines.size
        self.last_byte = int(buf[-1])
        self.offset += buf.size

    def index(self, block: bytes | memoryview, base: int, summary: bool = True) -> BlockIndex:
        """:func:`index_block` of ``block`` starting at byte ``base``, with this scanner's quote and delimiter.

        No summary when every record is collected (``record_lines``): each block needs its positions.
        """
        summary = summary and not (self.collect and self.longer_than is None)
        return index_block(
            block,
            quote=self.quote,
            delimiter=self.delimiter,
            base=base,
            data_start=self.data_start,
            summary=summary,
        )

    def _plain(self, summary: BlockSummary | None, buf: np.ndarray) -> int | None:
        """The bytes of the first record ending in the block, if the block can take :meth:`_feed_plain`.

        It can when every record it ends is whole and outside quotes (the
        summary shows it plain at this parity), none is the header, longer
        than ``longer_than`` or the last of a split, and records are not
        each collected.
        """
        if summary is None or summary.newlines == 0 or not summary.plain[self.parity]:
            return None
        if (self.header and self.header_end is None) or (self.collect and self.longer_than is None):
            return None
        first, base = summary.first, self.offset
        before = int(buf[first - 1]) if first else self.last_byte
        content = base + first - self.last_term - 1 - (before == CR)
        if self.longer_than is not None and max(content, buf.size) > self.longer_than:
            return None
        if self.split_bytes is not None:
            if self._split_start is None or base + summary.last >= self._split_start + self.split_bytes - 1:
                return None
        return content

    def _feed_plain(self, summary: BlockSummary, buf: np.ndarray, first_content: int) -> None:
        """:meth:`feed` of a plain block: its counts, without the positions of its records.

        The summary counts the empty lines among the newlines after the
        first; the first record, which may begin in an earlier block, is
        empty when ``first_content`` is 0.
        """
        self.rows += summary.newlines - 1 - summary.empty + (first_content > 0)
        self.last_term = self.offset + summary.last
        self.record_line = 1 + self.lines_before + summary.newlines
        self.lines_before += summary.newlines
        self.parity ^= summary.quotes & 1
        self.last_byte = int(buf[-1])
        self.offset += buf.size

    def finish(self) -> None:
        """Counts a last record without a final newline; checks quotes closed."""
        if self.parity:
            raise UnbalancedQuote("a quoted field is never closed (the file ends inside quotes)", self.record_line)
        content = self.offset - self.last_term - 1 - int(self.last_byte == CR and self.offset - 1 > self.last_term)
        if content > 0:  # a last record without a final newline; its "terminator" is EOF
            end = np.array([0], dtype=np.int64)  # relative to base = offset
            start = np.array([self.last_term + 1 - self.offset], dtype=np.int64)
            self._take_records(end, start, np.zeros(0, dtype=np.int64), self.offset, final=True)
        if self.split_bytes is not None and self._split_start is not None:
            rows = self.rows - self._split_rows_before
            if rows:
                self.splits.append(
                    Split(self._split_start, self.offset, rows, self._split_line, self._split_rows_before)
                )

    # ------------------------------------------------------------------ helpers
    def _check_openings(self, buf: np.ndarray, index: BlockIndex, base: int) -> None:
        """A quote seen at even parity opens a field: it must follow a delimiter or line start."""
        assert index.quotes is not None and index.newlines is not None
        bad = index.bad[self.parity]
        if self.parity == 0 and index.quotes[0] == 0 and base != self.data_start:  # after the block before's last byte
            if self.last_byte not in (self.delimiter, NEWLINE, CR, self.quote):
                bad = 0
        if bad >= 0:
            position = int(index.quotes[bad])
            line = 1 + self.lines_before + int(np.searchsorted(index.newlines, position))
            raise UnbalancedQuote("a quote character in the middle of an unquoted field", line)

    def _take_records(
        self, ends: np.ndarray, starts: np.ndarray, newlines: np.ndarray, base: int, final: bool = False
    ) -> None:
        if ends.size == 0:
            return
        first = 0  # the records taken: [first:] (the header is not)

        def lines_of(keep: np.ndarray | slice) -> np.ndarray:
            """The 1-based lines of the taken records ``keep`` starts at: computed only for those asked for
            (a split's first record, the long ones): the search over every record was 11 % of the scan."""
            chosen = np.arange(first, ends.size)[keep]
            lines = 1 + self.lines_before + np.searchsorted(newlines, starts[chosen])
            if starts[0] <= 0:  # began in an earlier block, right after its last terminator
                lines[chosen == 0] = self.record_line
            return lines

        if self.header and self.header_end is None:
            self.header_end = base + int(ends[0]) + 1
            self.header_lines = 1 + int(np.count_nonzero((newlines > starts[0]) & (newlines < ends[0])))
            first = 1
            if ends.size == 1:
                return
        taken_ends, taken_starts = ends[first:], starts[first:]
        if self.collect and self.longer_than is None:
            self.starts.append(base + taken_starts)
            self.lines.append(lines_of(slice(None)))
        elif self.collect:
            keep = np.flatnonzero(taken_ends - taken_starts > self.longer_than)
            if keep.size:
                self.starts.append(base + taken_starts[keep])
                self.lines.append(lines_of(keep))
                self.ends.append(base + taken_ends[keep])
                self.numbers.append(self.rows + 1 + keep)
                self.end_lines.append(1 + self.lines_before + np.searchsorted(newlines, taken_ends[keep]))
        if self.split_bytes is not None:
            if self._split_start is None:
                self._split_start = base + int(taken_starts[0])
                self._split_line = int(lines_of(slice(0, 1))[0])
            absolute_ends = base + taken_ends
            while not final:
                target = self._split_start + self.split_bytes - 1
                index = int(np.searchsorted(absolute_ends, target))
                if index >= absolute_ends.size:
                    break
                end = int(absolute_ends[index]) + 1
                rows_before = self.rows + index + 1
                self.splits.append(
                    Split(
                        self._split_start,
                        end,
                        rows_before - self._split_rows_before,
                        self._split_line,
                        self._split_rows_before,
                    )
                )
                self._split_start, self._split_rows_before = end, rows_before
                self._split_line = 1 + self.lines_before + int(np.searchsorted(newlines, end - base))
        self.rows += int(taken_ends.size)


def _has_byte(block: bytes | memoryview, byte: int) -> bool:
    """Whether ``byte`` is in ``block``: memchr for bytes; a memoryview is taken to hold it (its full pass runs)."""
    return block.find(byte) >= 0 if isinstance(block, (bytes, bytearray)) else True


Progress = Callable[[int], None]
"""``progress(bytes)``: the scan has fed that many bytes of the stream so far."""


def scan_stream(
    read: Callable[[int], bytes],
    scanner: Scanner,
    block_bytes: int = BLOCK_BYTES,
    progress: Progress | None = None,
) -> Scanner:
    """Feeds ``read(n)`` (a file's ``read``) to ``scanner`` until EOF, reading the next block while one is scanned.

    Reading a block (a copy out of the page cache, or decompression) costs
    about as much as scanning it, and both release the GIL, so on two cores
    the read hides behind the scan (the open of the 2 M-row CSV: 0.16–0.22 s
    less wall time); the reading thread also indexes the block
    (:func:`index_block`). One read runs at a time, in order, in a thread
    (``streamfeed-csv-scan``) joined before this returns, also when the
    scan raises.
    """
    offset = scanner.offset

    def read_block() -> tuple[bytes, BlockIndex]:
        nonlocal offset  # one read at a time, in order: the next block starts where this one ends
        block = read(block_bytes)
        index = scanner.index(block, offset)
        offset += len(block)
        return block, index

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="streamfeed-csv-scan") as pool:
        pending = pool.submit(read_block)
        try:
            while True:
                block, index = pending.result()
                if not block:
                    break
                pending = pool.submit(read_block)
                scanner.feed(block, index)
                if progress is not None:
                    progress(scanner.offset)
        finally:
            pending.cancel()
    scanner.finish()
    return scanner


def scan_ranges(
    read_at: Callable[[int, int], bytes],
    size: int,
    scanner: Scanner,
    *,
    threads: int,
    block_bytes: int = BLOCK_BYTES,
    progress: Progress | None = None,
) -> Scanner:
    """Feeds the ``size`` bytes of a file that can be read at any offset (``read_at(offset, n)``) to ``scanner``.

    ``threads`` threads (``streamfeed-csv-scan``) read and index the next
    blocks (:func:`index_block`: the byte passes, 80 % of the scan) while
    this thread feeds them to the scanner in file order, so the count is the
    one :func:`scan_stream` gives (same records, splits, lines and errors)
    at up to ``threads`` times its speed: with the summaries, a 3.65 GB
    click log, cold, in 3.8 s against 6.9 (1.44 CPU s per GB against 2.09;
    ``benchmarks/csv_count.py``, two cores). At most
    ``2 * threads + 1`` tasks of :data:`TASK_BLOCKS` blocks are held; the threads are joined before this
    returns, also when the scan raises. A file that ends early (truncated
    while it is counted) raises ``OSError``.
    """
    step = block_bytes * TASK_BLOCKS
    offsets = iter(range(scanner.offset, size, step))

    def read_blocks(start: int) -> list[tuple[bytes, BlockIndex]]:
        blocks = []
        for offset in range(start, min(start + step, size), block_bytes):
            wanted = min(block_bytes, size - offset)
            block = read_at(offset, wanted)
            if len(block) != wanted:
                raise FileChangedError(
                    describe(f"the file ended at byte {offset + len(block)} while it was counted ({size} at open)")
                )
            blocks.append((block, scanner.index(block, offset)))
        return blocks

    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="streamfeed-csv-scan") as pool:
        first = itertools.islice(offsets, 2 * threads)
        pending = collections.deque(pool.submit(read_blocks, offset) for offset in first)
        try:
            while pending:
                blocks = pending.popleft().result()
                offset = next(offsets, None)
                if offset is not None:
                    pending.append(pool.submit(read_blocks, offset))
                for block, index in blocks:
                    scanner.feed(block, index)
                    if progress is not None:
                        progress(scanner.offset)
        finally:
            for future in pending:
                future.cancel()
    scanner.finish()
    return scanner


def record_lines(data: bytes, *, quote: int | None, delimiter: int, first_line: int) -> np.ndarray:
    """The 1-based physical line where each record of ``data`` starts (no header)."""
    scanner = Scanner(quote=quote, delimiter=delimiter, header=False, collect=True, data_start=-1)
    try:
        scanner.feed(data)
        scanner.finish()
    except UnbalancedQuote:
        pass  # only for messages: the records found so far are still right
    if not scanner.lines:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(scanner.lines) + (first_line - 1)


@dataclass(frozen=True)
class LongRecord:
    """A record of ``data[start:end]`` (its line end, if any, at ``end``), found by :func:`long_records`."""

    number: int  # 1-based, among the records of the data
    start: int
    end: int
    line: int  # 1-based physical line of its first byte
    head: bytes  # its first bytes, for messages

    @property
    def size(self) -> int:
        """Its bytes up to its newline (the carriage return of a ``\\r\\n`` counts, as it does for pyarrow)."""
        return self.end - self.start


def long_records(
    data: bytes, *, quote: int | None, delimiter: int, first_line: int, longer_than: int
) -> list[LongRecord]:
    """The records of ``data`` (whole records, no header) of more than ``longer_than`` bytes, in order.

    Fed in blocks, so the scan's temporaries stay small beside ``data``;
    only the long records are kept.
    """
    scanner = Scanner(
        quote=quote, delimiter=delimiter, header=False, collect=True, longer_than=longer_than, data_start=-1
    )
    view = memoryview(data)
    try:
        for offset in range(0, len(view), _FIND_BLOCK_BYTES):
            scanner.feed(view[offset : offset + _FIND_BLOCK_BYTES])
        scanner.finish()
    except UnbalancedQuote:
        pass  # the source's scan checked the quotes; the records found so far are still right
    if not scanner.numbers:
        return []
    columns = (np.concatenate(part) for part in (scanner.numbers, scanner.starts, scanner.ends, scanner.lines))
    return [
        LongRecord(int(number), int(start), int(end), int(line) + first_line - 1, bytes(view[start : start + 40]))
        for number, start, end, line in zip(*columns)
    ]


def too_long(scanner: Scanner) -> list[list[int]]:
    """The long records a ``collect``/``longer_than`` scan found: ``[number, start, end, line, end_line]`` each.

    ``number`` counts data records from 1; ``end`` is the offset of the line
    end (or of the end of the data); ``line`` and ``end_line`` are the
    physical lines of the first byte and of the line end. Plain lists, for
    the JSON row-count index.
    """
    if not scanner.numbers:
        return []
    parts = (scanner.numbers, scanner.starts, scanner.ends, scanner.lines, scanner.end_lines)
    return [[int(value) for value in row] for row in zip(*(np.concatenate(part) for part in parts))]
