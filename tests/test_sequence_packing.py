"""``Dataset.pack_sequences``: many short token lists packed first-fit-decreasing into fixed-length rows.

The input is a Parquet file written by pyarrow (token lists of lengths
0..64, a tenth of them empty, with a second list column ``tgt`` of the same
lengths and scalar columns ``id`` and ``y``); every packed row is taken
apart again here by its segment ids and compared with the rows pyarrow
reads back. The first-fit-decreasing placement itself is checked against a
plain-Python reference packer over each fragment's rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

ROWS, ROW_GROUP, LENGTH = 500, 70, 64


def write_tokens(path: Path, rows: int = ROWS, longest: int = LENGTH, seed: int = 5) -> dict[int, dict]:
    """Rows ``id``, ``tok`` (ids 1..999), ``tgt`` (tok + 1), ``y``; a tenth empty. The truth by id."""
    rng = np.random.default_rng(seed)
    lengths = np.where(rng.random(rows) < 0.1, 0, rng.integers(1, longest + 1, rows))
    tokens = [rng.integers(1, 1000, size=int(n)).tolist() for n in lengths]
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "tok": pa.array(tokens, pa.list_(pa.int32())),
            "tgt": pa.array([[t + 1 for t in row] for row in tokens], pa.list_(pa.int32())),
            "y": (np.arange(rows) % 7).astype(np.float32),
        }
    )
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    return {row["id"]: row for row in pq.read_table(path).to_pylist()}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> tuple[Path, dict[int, dict]]:
    path = tmp_path_factory.mktemp("pack") / "tokens.parquet"
    return path, write_tokens(path)


def rows_of(ds: sf.Dataset, epoch: int = 0, state=None) -> list[dict[str, np.ndarray]]:
    """The packed rows of one epoch, batched or not, one dict per packed row."""
    out = []
    with ds.iter_epoch(epoch, state=state) as stream:
        for chunk in stream:
            count = len(chunk["tok"])
            out += [{name: np.asarray(column[i]) for name, column in chunk.items()} for i in range(count)]
    return out


def segments(row: dict[str, np.ndarray], column: str) -> list[tuple[int, list[int]]]:
    """``(segment id, tokens)`` of one packed row's ``column``, checking the segment ids' and positions' form."""
    ids, positions, values = row[f"{column}_segment_ids"], row[f"{column}_positions"], row[column]
    assert ids.dtype == np.int32 and positions.dtype == np.int32 and ids.shape == values.shape
    used = int(np.count_nonzero(ids))
    assert (ids[used:] == 0).all() and (values[used:] == 0).all() and (positions[used:] == 0).all()  # padding last
    assert (np.diff(ids[:used]) >= 0).all()  # each segment contiguous, in order
    out = []
    for segment in np.unique(ids[:used]):
        where = ids == segment
        assert positions[where].tolist() == list(range(int(where.sum())))
        out.append((int(segment), values[where].tolist()))
    return out


def check_every_row_once(rows: list[dict[str, np.ndarray]], truth: dict[int, dict], length: int = LENGTH) -> None:
    seen = []
    for row in rows:
        assert row["tok"].shape == (length,) and row["tok"].dtype == np.int32
        tok, tgt = segments(row, "tok"), segments(row, "tgt")
        assert [s for s, _ in tok] == list(range(1, len(tok) + 1)) and [s for s, _ in tgt] == [s for s, _ in tok]
        count = len(tok)
        assert (row["id"][count:] == 0).all() and (row["y"][count:] == 0).all()
        for (segment, values), (_, targets) in zip(tok, tgt):
            source = truth[int(row["id"][segment - 1])]
            assert values == source["tok"] and targets == source["tgt"]
            assert row["y"][segment - 1] == source["y"]
            seen.append(source["id"])
    assert sorted(seen) == sorted(i for i, source in truth.items() if source["tok"])


def test_every_row_once_with_segment_ids_and_positions(tokens):
    path, truth = tokens
    ds = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], max_segments=32)
    rows = rows_of(ds)
    check_every_row_once(rows, truth)
    assert len(ds) == len(rows) < ROWS / 2  # counted before the first row, and packed several to a row
    assert rows[0]["id"].shape == (32,) and rows[0]["id"].dtype == np.int64


@pytest.mark.parametrize("last_batch", ["keep", "drop"])
def test_batches_of_packed_rows_are_counted_exactly(tokens, last_batch):
    path, truth = tokens
    ds = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"]).shuffle(4, window=3)
    packed = len(ds)
    batched = ds.batch(8, last_batch=last_batch)
    with batched.iter_epoch(0) as stream:
        batches = list(stream)
    assert len(batched) == len(batches) == (packed // 8 if last_batch == "drop" else -(-packed // 8))
    assert all(batch["tok"].shape[1:] == (LENGTH,) for batch in batches)
    if last_batch == "keep":
        check_every_row_once(rows_of(batched), truth)


def first_fit_decreasing(lengths: list[int], capacity: int, most: int | None = None) -> list[list[int]]:
    """The reference: rows (their indices) by decreasing length, ties in source order, each into the first bin
    with room (and fewer than ``most`` rows)."""
    bins: list[list[int]] = []
    room: list[int] = []
    for index in sorted((i for i, n in enumerate(lengths) if n), key=lambda i: -lengths[i]):
        for b, free in enumerate(room):
            if free >= lengths[index] and (most is None or len(bins[b]) < most):
                bins[b].append(index)
                room[b] -= lengths[index]
                break
        else:
            bins.append([index])
            room.append(capacity - lengths[index])
    return bins


@pytest.mark.parametrize("columns, most", [(["id", "tok", "tgt"], None), (["id", "tok"], None), (["id", "tok"], 3)])
def test_placement_is_first_fit_decreasing_per_fragment(tokens, columns, most):
    path, truth = tokens
    rows = rows_of(sf.read_parquet(path, columns=columns).pack_sequences(LENGTH, seed=None, max_segments=most))
    expected = []
    for start in range(0, ROWS, ROW_GROUP):  # unshuffled: fragment by fragment, each's bins in order
        ids = list(range(start, min(start + ROW_GROUP, ROWS)))
        lengths = [len(truth[i]["tok"]) for i in ids]
        expected += [[ids[i] for i in b] for b in first_fit_decreasing(lengths, LENGTH, most)]
    served = [row["id"][: int(row["tok_segment_ids"].max())].tolist() for row in rows]
    assert served == expected


def test_the_same_for_a_seed_and_another_for_another_seed_or_epoch(tokens):
    path, truth = tokens
    ds = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], seed=3).shuffle(1, window=2).batch(16)

    def ids(dataset: sf.Dataset, epoch: int) -> list[list[int]]:
        return [row["id"].tolist() for row in rows_of(dataset, epoch)]

    first = ids(ds, 0)
    again = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], seed=3).shuffle(1, window=2).batch(16)
    assert ids(again, 0) == first == ids(ds, 0)
    other = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], seed=4).shuffle(1, window=2).batch(16)
    packings = {tuple(map(tuple, sorted(packing))) for packing in (first, ids(ds, 1), ids(other, 0))}
    assert len(packings) == 3  # which equal-length rows share a packed row changes with the seed and the epoch
    assert ds.num_batches(0) == ds.num_batches(1) == other.num_batches(0)  # the count does not
    check_every_row_once(rows_of(ds, 1), truth)


def test_the_same_for_one_and_four_read_threads(tokens):
    path, _ = tokens
    ds = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"]).shuffle(2, window=3).batch(16)
    one, four = (rows_of(ds.with_options(read_threads=n)) for n in (1, 4))
    assert len(one) == len(four)
    for a, b in zip(one, four):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("stop", [1, 5, 11])
def test_resume_mid_epoch_serves_the_rest_of_the_uninterrupted_epoch(tokens, stop):
    path, _ = tokens
    ds = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], seed=8).shuffle(6, window=2).batch(4)
    with ds.iter_epoch(1) as stream:
        full = list(stream)
    with ds.iter_epoch(1) as stream:
        for _ in range(stop):
            next(stream)
        state = stream.get_state()
    fresh = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], seed=8).shuffle(6, window=2).batch(4)
    assert fresh.num_batches(state=state) == len(full) - stop
    with fresh.iter_epoch(state=state) as stream:
        rest = list(stream)
    assert len(rest) == len(full) - stop
    for a, b in zip(rest, full[stop:]):
        assert all(np.array_equal(a[k], b[k]) for k in b)


@pytest.fixture(scope="module")
def long_rows(tmp_path_factory) -> tuple[Path, dict[int, list[int]]]:
    """Rows of lengths 1..40, tokens increasing within a row (so pieces of a split row sort back into it)."""
    rng = np.random.default_rng(9)
    lengths = rng.integers(1, 41, 120)
    tokens = [(1000 * (i + 1) + np.arange(n)).tolist() for i, n in enumerate(lengths)]
    path = tmp_path_factory.mktemp("pack-long") / "long.parquet"
    table = pa.table({"id": np.arange(120), "tok": pa.array(tokens, pa.list_(pa.int64()))})
    pq.write_table(table, path, row_group_size=50)
    return path, dict(enumerate(tokens))


def pieces_by_id(rows: list[dict[str, np.ndarray]]) -> dict[int, list[list[int]]]:
    out: dict[int, list[list[int]]] = {}
    for row in rows:
        for segment, values in segments(row, "tok"):
            out.setdefault(int(row["id"][segment - 1]), []).append(values)
    return out


def test_a_row_longer_than_the_length_raises_naming_file_row_and_column(long_rows):
    path, truth = long_rows
    with pytest.raises(sf.DataError) as excinfo:
        rows_of(sf.read_parquet(path).pack_sequences(16))
    message = str(excinfo.value)
    first = next(i for i in range(50) if len(truth[i]) > 16)
    assert str(path) in message and f"row {first}" in message and "'tok'" in message
    assert "truncate=" in message  # the fix names the policies


@pytest.mark.parametrize("truncate", ["end", "start", "split"])
def test_truncation_policies(long_rows, truncate):
    path, truth = long_rows
    rows = rows_of(sf.read_parquet(path).pack_sequences(16, truncate=truncate, max_segments=16))
    pieces = pieces_by_id(rows)
    assert sorted(pieces) == sorted(truth)
    for index, row in truth.items():
        if truncate == "split":
            got = sorted(pieces[index], key=lambda piece: piece[0])
            assert sum(got, []) == row and all(len(piece) <= 16 for piece in got)
            assert [len(piece) for piece in got][:-1] == [16] * (len(got) - 1)
        else:
            assert pieces[index] == [row[:16] if truncate == "end" else row[-16:]]
    assert any(len(p) > 1 for p in pieces.values()) == (truncate == "split")


def served_ids(rows: list[dict[str, np.ndarray]]) -> list[int]:
    return sorted(int(r["id"][s - 1]) for r in rows for s, _ in segments(r, "tok"))


def test_filters_before_and_after_packing_are_counted(tokens):
    path, truth = tokens
    even = sf.read_parquet(path).filter(lambda c: c["id"] % 2 == 0, name="even").pack_sequences(LENGTH)
    rows = rows_of(even)
    assert len(even) == len(rows)
    assert served_ids(rows) == sorted(i for i, source in truth.items() if source["tok"] and i % 2 == 0)
    crowded = (
        sf.read_parquet(path)
        .pack_sequences(LENGTH)
        .filter(lambda c: c["tok_segment_ids"].max(axis=1) > 2, name="crowded")
    )
    rows = rows_of(crowded)
    assert len(crowded) == len(rows) > 0 and all(int(r["tok_segment_ids"].max()) > 2 for r in rows)


def test_a_saved_state_is_refused_under_another_packing(tokens):
    path, _ = tokens
    base = sf.read_parquet(path)

    def pipeline(**settings) -> sf.Dataset:
        return (
            base.pack_sequences(**{"length": LENGTH, "columns": ["tok", "tgt"], **settings})
            .shuffle(1, window=2)
            .batch(8)
        )

    with pipeline().iter_epoch(0) as stream:
        next(stream)
        state = stream.get_state()
    with pipeline().iter_epoch(state=state) as stream:
        next(stream)  # the same packing restores
    for changed in (
        {"length": 32},
        {"truncate": "split"},
        {"seed": 1},
        {"value": -1},
        {"max_segments": 4},
        {"columns": ["tok"]},
        {"length": {"tok": LENGTH, "tgt": 32}},
    ):
        with pytest.raises(sf.StateError, match="ops"):
            pipeline(**changed).iter_epoch(state=state)


def test_columns_of_their_own_length(tokens):
    path, truth = tokens
    rows = rows_of(sf.read_parquet(path).pack_sequences({"tok": 64, "tgt": 80}))
    assert rows[0]["tok"].shape == (64,) and rows[0]["tgt"].shape == (80,)
    assert served_ids(rows) == sorted(i for i, source in truth.items() if source["tok"])


def test_max_segments_caps_the_rows_per_packed_row(tokens):
    path, truth = tokens
    rows = rows_of(sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"], max_segments=2))
    assert max(int(r["tok_segment_ids"].max()) for r in rows) == 2 and rows[0]["id"].shape == (2,)
    check_every_row_once(rows, truth)


@pytest.mark.parametrize(
    "settings, match",
    [
        ({"length": 0}, "pack length"),
        ({"length": 8, "truncate": "middle"}, "truncate"),
        ({"length": 8, "max_segments": 0}, "max_segments"),
        ({"length": 8, "value": "x"}, "pack value"),
        ({"length": 8, "seed": -1}, "pack seed"),
        ({"length": 8, "columns": "tok"}, "pack columns"),
        ({"length": {"tok": 8}, "columns": ["tgt"]}, "length"),
    ],
)
def test_invalid_settings_are_refused_with_the_error_shape(tokens, settings, match):
    path, _ = tokens
    with pytest.raises(sf.ArgumentError, match=match) as excinfo:
        sf.read_parquet(path).pack_sequences(**settings)
    assert "Expected" in str(excinfo.value) or "expected" in str(excinfo.value)


def test_pack_after_batch_and_a_column_that_is_not_a_list_are_refused(tokens):
    path, _ = tokens
    with pytest.raises(sf.ArgumentError, match="before batch"):
        sf.read_parquet(path).batch(8).pack_sequences(8)
    with pytest.raises(sf.ArgumentError, match="'y'"):
        rows_of(sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "y"]))
    with pytest.raises(sf.ArgumentError, match="'nope'"):
        rows_of(sf.read_parquet(path).pack_sequences(LENGTH, columns=["nope"]))


def test_fragments_of_only_empty_rows_or_no_rows_pack_into_nothing(tokens):
    path, _ = tokens
    empty = sf.read_parquet(path).filter(lambda c: c["tok"].lengths() == 0, name="empty").pack_sequences(LENGTH)
    nothing = sf.read_parquet(path).filter(lambda c: c["id"] < 0, name="none").pack_sequences(LENGTH)
    for ds in (empty, nothing):
        assert len(ds) == 0 and rows_of(ds) == [] and len(ds.batch(4)) == 0


def test_under_skip_a_fragment_with_a_row_too_long_is_left_out_of_the_count_and_the_epoch(long_rows):
    path, truth = long_rows
    ds = sf.read_parquet(path, on_error="skip").pack_sequences(39)  # only some fragments hold a row of 40
    long = {start for start in range(0, 120, 50) if any(len(truth[i]) > 39 for i in range(start, min(start + 50, 120)))}
    assert 0 < len(long) < 3
    rows = rows_of(ds)
    assert len(ds) == len(rows) > 0
    kept = [i for i in truth if i - i % 50 not in long]
    assert sorted(pieces_by_id(rows)) == kept and ds.report.skipped_units == len(long)


def test_shards_of_packed_rows_partition_them(tokens):
    path, truth = tokens
    ds = sf.read_parquet(path).pack_sequences(LENGTH, columns=["tok", "tgt"]).shuffle(3, window=2)
    whole = rows_of(ds.batch(4))
    parts = [rows_of(ds.shard(index, 2, remainder="pad").batch(2)) for index in range(2)]
    assert len(parts[0]) == len(parts[1]) >= len(whole) / 2
    served = [row["id"].tolist() for part in parts for row in part]
    assert sorted(map(tuple, {tuple(ids) for ids in served})) == sorted(tuple(row["id"].tolist()) for row in whole)


def test_split_cuts_every_packed_column_into_pieces_of_its_own_length(tokens):
    path, truth = tokens
    rows = rows_of(sf.read_parquet(path).pack_sequences({"tok": 16, "tgt": 8}, truncate="split", max_segments=8))
    pieces: dict[str, dict[int, list[list[int]]]] = {"tok": {}, "tgt": {}}
    segments_of: dict[int, int] = {}
    for row in rows:
        for segment in range(1, int(max(row["tok_segment_ids"].max(), row["tgt_segment_ids"].max())) + 1):
            source = int(row["id"][segment - 1])
            segments_of[source] = segments_of.get(source, 0) + 1
        for column in ("tok", "tgt"):
            for segment, values in segments(row, column):
                pieces[column].setdefault(int(row["id"][segment - 1]), []).append(values)
    for index, source in truth.items():
        if not source["tok"]:
            assert index not in segments_of
            continue
        assert segments_of[index] == -(-len(source["tgt"]) // 8)  # tgt's 8 cut more pieces than tok's 16
        for column, length in (("tok", 16), ("tgt", 8)):
            got = pieces[column][index]
            assert len(got) == -(-len(source[column]) // length) and all(len(piece) <= length for piece in got)
            assert sorted(sum(got, [])) == sorted(source[column])


def test_the_memory_layout_counts_packed_rows_at_three_times_the_source_bytes(tokens):
    path, _ = tokens
    plain = sf.read_parquet(path).shuffle(1, window=4).batch(8, pad=sf.Pad())
    packed = sf.read_parquet(path).pack_sequences(LENGTH).shuffle(1, window=4).batch(8)
    buffers = plain.resolution.layout(), packed.resolution.layout()
    assert buffers[1].estimated_bytes > 2 * buffers[0].estimated_bytes  # the unit buffers, read-ahead and batches
