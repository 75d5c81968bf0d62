"""Saving the data state with the model, and resuming mid-epoch.

    ckpt = DataCheckpoint(train, "ckpt/", every=100)
    model.fit(train, epochs=5, initial_epoch=ckpt.initial_epoch, callbacks=[ckpt])

Every ``every`` trained batches and at each epoch end, the callback writes
the model's weights (with optimizer state) and ``data_state.json``: the
data state (:meth:`KerasDataset.get_state`) after the last batch *trained*,
which the callback counts in ``on_train_batch_end``, not the last batch
Keras read ahead. Restarted in a new process with the same pipeline, it
restores both when training begins (:meth:`KerasDataset.set_state`), and
the resumed epoch serves exactly the batches an uninterrupted run would
have served next.

Weights and position are one checkpoint, or none. ``data_state.json`` is
the commit record; a save (like SQLite's commit, or Orbax's temporary
step directories) goes:

1. the weights are written into a new private temporary directory
   (``tempfile.mkdtemp``: a fresh name, mode 0700, so nothing can be
   planted in it) and ``fsync``-ed;
2. the state, naming ``model-<save>.weights.h5`` and recording its SHA-256,
   is written to a fresh
   temporary file (``files.atomic``: ``tempfile.mkstemp``, ``O_CREAT | O_EXCL``,
   never an existing name or link) through its descriptor, ``fsync``-ed, published
   with ``os.replace`` (which replaces a link at the destination rather
   than following it), and the directory is ``fsync``-ed — the commit;
3. the weights are moved to their final name with ``os.replace`` and the
   directory is ``fsync``-ed;
4. only then are older weights and leftovers of interrupted saves removed.

So a final-named weights file exists only once a state named it, and a
crash at any point leaves either the previous checkpoint whole (before 2:
the new weights sit in a temporary directory, ignored) or the new one
(after 2: a state naming weights still in their temporary directory is
completed on load, a redo). Without the syncs, a power loss could leave
the renamed state empty, or bring back the old state after its weights
were deleted.

Loading refuses, with a :class:`StateError` naming the file or field, a
state whose weights file is missing or is not this save's own, weights
files without a state (the state was deleted: resuming would train fresh
weights from a saved position, or fresh data from saved weights), and any
field of the wrong type or out of range; the data state itself is checked
by the pipeline, before training starts. The state binds its weights by
their SHA-256 (``weights_sha256``): weights of another model of the same
architecture, or newer weights put under a rolled-back state's name, are
refused naming both files (a state saved before the digest existed is
resumed with a warning). One process checkpoints into a directory at a
time: :func:`lock_directory` (``flock`` on :data:`LOCK_FILE`) refuses a
second one, naming the holder's pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Mapping, NoReturn

import keras

from ..errors import StateError, describe
from ..files.atomic import write_atomic
from .adapter import KerasDataset
from .workers import check_workers_agree, jax_gather, process_index

logger = logging.getLogger("streamfeed")
STATE_FILE = "data_state.json"
WEIGHTS_PATTERN = "model-{:06d}.weights.h5"
PENDING_PREFIX = ".save-"  # + save number + "-": a save's private temporary directory
LOCK_FILE = ".data_checkpoint.lock"  # flock-ed by the one process checkpointing into the directory; holds its pid
FIELDS = ("keras_epoch", "data", "save_number", "weights", "weights_sha256")
_DIGEST_BLOCK = 1 << 20
_FIX = (
    "restore the checkpoint directory's files as they were saved, "
    "or give DataCheckpoint a new directory to train from the start"
)


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def weights_digest(path: Path) -> str:
    """The SHA-256 of a weights file: what binds it to the data state saved with it."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(_DIGEST_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _atomic_write_json(path: Path, data: dict) -> None:
    """Publishes ``data`` at ``path``: complete and durable (file and directory synced), or not at all; never
    through a link (:func:`~streamfeed.files.atomic.write_atomic`)."""
    write_atomic(path, json.dumps(data, indent=1), durable=True)


_HELD: dict[str, list[int]] = {}  # real path of a directory -> [lock file descriptor, holders in this process]
_HELD_GUARD = threading.Lock()


def lock_directory(directory: Path) -> str:
    """Takes ``directory``'s checkpoint lock for this process; returns the key to :func:`unlock_directory`.

    An exclusive ``flock`` on :data:`LOCK_FILE` (opened ``O_NOFOLLOW``: a
    link planted there is refused), with this process's pid written in it:
    a second process checkpointing into the directory would delete the
    first one's pending weights as leftovers (it died with a raw
    ``FileNotFoundError``) and interleave their states, so it is refused,
    naming the holder. The kernel drops the lock when its holder exits, even
    by ``kill -9``: a crash leaves no stale lock (only, at worst, the file).
    The last holder removes the file, so a finished checkpoint directory
    holds only the checkpoint. Checkpoints of one process share its lock (a
    notebook cell run again after an interrupted ``fit`` still holds the
    old callback).
    """
    directory.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(directory)
    with _HELD_GUARD:
        if key in _HELD:
            _HELD[key][1] += 1
            return key
        while True:
            descriptor = _try_lock(directory)
            if _is_the_lock_file(directory / LOCK_FILE, descriptor):
                break
            os.close(descriptor)  # locked a file its last holder had just removed: lock the new one
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = [descriptor, 1]
        return key


def _is_the_lock_file(lock: Path, descriptor: int) -> bool:
    try:
        named = os.stat(lock, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _try_lock(directory: Path) -> int:
    """The lock file's descriptor, flock-ed; StateError naming the holder if another process has it."""
    lock = directory / LOCK_FILE
    try:
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if not lock.is_symlink():
            raise
        raise StateError(
            describe(
                f"Cannot checkpoint into {directory}: its lock file is a symbolic link",
                where=str(lock),
                expected="a regular lock file (or none yet)",
                found=f"a link to {os.readlink(lock)!r}",
                fix="remove the link (streamfeed never writes through it)",
            )
        ) from exc
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip() or "unknown (starting)"
        os.close(descriptor)
        raise StateError(
            describe(
                f"Cannot checkpoint into {directory}: another process is checkpointing there",
                where=str(lock),
                expected="one process saving checkpoints into a directory at a time",
                found=f"the directory locked by process {holder}",
                fix=f"give this run another directory, or stop process {holder} first",
            )
        ) from None
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def unlock_directory(key: str) -> None:
    """Gives back one holder's share of a directory's lock; the last one closes it (releasing the flock)."""
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            lock = Path(key) / LOCK_FILE
            with contextlib.suppress(OSError):
                if _is_the_lock_file(lock, held[0]):
                    lock.unlink()  # still locked: whoever opens it next finds it gone and makes a new one
            os.close(held[0])


def _move_in_place(pending: Path, final: Path) -> None:
    """Gives committed weights their final name (replacing, not following, whatever is there)."""
    os.replace(pending, final)
    _fsync(final.parent, directory=True)
    with contextlib.suppress(OSError):
        pending.parent.rmdir()


def _pending_weights(directory: Path, name: str, save_number: int) -> Path | None:
    """The weights of save ``save_number`` still in their temporary directory, if exactly one is there."""
    found = [
        path / name
        for path in directory.glob(f"{PENDING_PREFIX}{save_number:06d}-*")
        if path.is_dir() and not path.is_symlink() and (path / name).is_file() and not (path / name).is_symlink()
    ]
    return found[0] if len(found) == 1 else None


def _committed_weights(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob(WEIGHTS_PATTERN.replace("{:06d}", "*")))


def _refuse(path: Path, problem: str, *, expected: str, found: str, fix: str = _FIX) -> NoReturn:
    raise StateError(describe(f"Cannot resume from {path}: {problem}", expected=expected, found=found, fix=fix))


def _count_field(path: Path, saved: Mapping[str, Any], name: str, minimum: int) -> int:
    value = saved.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _refuse(
            path,
            f"the field '{name}' is missing, of the wrong type or out of range",
            expected=f"an integer >= {minimum}",
            found=repr(value) if name in saved else "no such field",
        )
    return value


def load_checkpoint(directory: Path, *, save_model: bool) -> dict[str, Any] | None:
    """The checked state of the checkpoint in ``directory``, or None if it holds none (yet).

    Completes a save interrupted after its commit (its weights still in
    their temporary directory); raises :class:`StateError` naming the file
    or field for anything else that does not make one whole checkpoint.
    """
    path = directory / STATE_FILE
    if not (path.exists() or path.is_symlink()):
        weights = _committed_weights(directory) if directory.is_dir() else []
        if weights:
            _refuse(
                path,
                f"weights {weights} are there without the data state saved with them",
                expected=f"{STATE_FILE} naming one of them",
                found=f"no {STATE_FILE}",
                fix="restore data_state.json as it was saved; or, to start over, give DataCheckpoint a new directory "
                "(or remove the weights files)",
            )
        return None  # nothing saved, or only a first save cut short before its commit
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        _refuse(path, "the state file cannot be read", expected="a JSON object", found=f"{type(exc).__name__}: {exc}")
    if not isinstance(saved, dict):
        _refuse(path, "the state file is not a JSON object", expected="a JSON object", found=type(saved).__name__)
    unknown = sorted(set(saved) - set(FIELDS))
    if unknown:
        _refuse(
            path,
            f"unknown field(s) {', '.join(repr(name) for name in unknown)}",
            expected=f"only the fields {list(FIELDS)}",
            found=f"also {unknown}",
        )
    _count_field(path, saved, "keras_epoch", 0)
    save_number = _count_field(path, saved, "save_number", 1)
    if not isinstance(saved.get("data"), dict):
        _refuse(
            path,
            "the field 'data' (the data state) is missing or not an object",
            expected="the data state saved by KerasDataset.get_state",
            found=type(saved.get("data")).__name__ if "data" in saved else "no such field",
        )
    expected_weights = WEIGHTS_PATTERN.format(save_number)
    if "weights" in saved and saved["weights"] != expected_weights:
        _refuse(
            path,
            "the field 'weights' does not name this save's weights file",
            expected=f"{expected_weights!r}, in the checkpoint directory (save {save_number})",
            found=repr(saved["weights"]),
        )
    if save_model:
        if "weights" not in saved:
            _refuse(
                path,
                "the data state has no weights saved with it (no field 'weights')",
                expected=f"'weights': {expected_weights!r}",
                found="a state saved without the model (save_model=False)",
                fix="pass save_model=False to resume the data position alone, or give DataCheckpoint a new "
                "directory to train from the start",
            )
        final = directory / expected_weights
        pending = None if final.is_file() else _pending_weights(directory, expected_weights, save_number)
        if not final.is_file() and pending is None:
            _refuse(
                path,
                f"the weights file {final} it names is missing",
                expected=f"{final}, saved with the state",
                found="no such file (nor an unfinished save of it)",
                fix="restore the weights file as it was saved; resuming without it would train fresh weights "
                "from the saved data position",
            )
        _check_digest(path, saved, pending or final)
        if pending is not None:
            _move_in_place(pending, final)  # the save was committed: complete it
            logger.info("completed the interrupted save of %s", final)
    return saved


def _check_digest(path: Path, saved: Mapping[str, Any], weights: Path) -> None:
    """Refuses weights other than those saved with the state: another model's, or newer ones under its name."""
    recorded = saved.get("weights_sha256")
    if recorded is None:  # saved before states recorded it: nothing to check against
        logger.warning("%s records no digest of %s (saved by an older streamfeed): not checked", path, weights.name)
        return
    if not isinstance(recorded, str) or len(recorded) != 64:
        _refuse(
            path,
            "the field 'weights_sha256' is not a SHA-256 digest",
            expected="64 hexadecimal digits",
            found=repr(recorded),
        )
    found = weights_digest(weights)
    if found != recorded:
        _refuse(
            path,
            f"the weights file {weights} is not the one saved with this data state",
            expected=f"weights with SHA-256 {recorded}, as recorded in {path} (save {saved['save_number']})",
            found=f"SHA-256 {found} (another model's weights, or a state rolled back next to newer weights)",
            fix="put back the weights and the data state saved together, or give DataCheckpoint a new directory "
            "to train from the start",
        )


class DataCheckpoint(keras.callbacks.Callback):
    """Checkpoints model weights and the data position together.

    Args:
        dataset: the :class:`KerasDataset` given to ``fit``.
        directory: where the checkpoint lives (created if needed).
        every: also save every ``every`` trained batches (``None``: only at
            epoch ends).
        save_model: save and restore the model's weights too (default).

    Raises:
        StateError: ``directory`` holds a checkpoint that is not whole (a
            state without its weights or the reverse, a field of the wrong
            type or out of range, weights other than those saved with the
            state), or whose data state belongs to another pipeline; or
            another process is checkpointing into ``directory``.
    """

    def __init__(
        self, dataset: KerasDataset, directory: str | os.PathLike, *, every: int | None = None, save_model: bool = True
    ) -> None:
        super().__init__()
        self.dataset = dataset
        self.directory = Path(directory)
        self.every = every
        self.save_model = save_model
        self._epoch, self._trained = 0, 0
        # The process that commits holds the directory's lock (lock_directory) from here until training ends or
        # the callback is collected; it takes it again if it trains or saves once more.
        self._commits = jax_gather() is None or process_index() == 0
        self._unlock: weakref.finalize | None = None
        self._lock()
        try:
            self._saved = load_checkpoint(self.directory, save_model=save_model)
            if self._saved is not None:
                dataset.dataset.num_batches(state=self._saved["data"])  # the pipeline checks it: StateError
        except BaseException:
            self._release()
            raise
        self._saves = int(self._saved["save_number"]) if self._saved else 0

    def _lock(self) -> None:
        if self._commits and (self._unlock is None or not self._unlock.alive):
            self._unlock = weakref.finalize(self, unlock_directory, lock_directory(self.directory))

    def _release(self) -> None:
        if self._unlock is not None:
            self._unlock()

    @property
    def initial_epoch(self) -> int:
        """The Keras epoch to pass as ``fit(initial_epoch=...)`` (0 without a checkpoint)."""
        return int(self._saved["keras_epoch"]) if self._saved else 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._lock()
        if self._saved is None:
            return
        self.dataset.set_state(self._saved["data"])
        if self.save_model:
            restore_weights(self.model, self.directory, self._saved)
        logger.info(
            "resumed from %s: Keras epoch %d, data epoch %d at %s",
            self.directory,
            self.initial_epoch,
            self._saved["data"]["epoch"],
            {k: v for k, v in self._saved["data"].items() if k in ("unit", "offset", "batches")},  # sharded: batches
        )

    def on_train_end(self, logs: dict | None = None) -> None:
        self._release()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch, self._trained = epoch, 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        # With steps_per_execution, `batch` is the last step of the execution,
        # numbered as if a short last execution were full, and the count
        # jumps: save whenever it passes a multiple of `every`.
        epoch_batches = self.dataset.num_batches
        before, self._trained = self._trained, min(batch + 1, epoch_batches)
        if self.every and self._trained // self.every > before // self.every:
            # After the epoch's last batch the data state is the next epoch's
            # start, so the Keras epoch to resume at is the next one too.
            finished = self._trained >= epoch_batches
            self._save(keras_epoch=self._epoch + finished, trained=self._trained)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._save(keras_epoch=epoch + 1, trained=self._trained)

    def _save(self, *, keras_epoch: int, trained: int) -> None:
        """One checkpoint, in the order the module docstring argues for.

        In a job of several training processes (JAX multi-process), every
        process saves at the same step with the same data state — a sharded
        state is a position in the global order, not a worker's — which they
        check with one collective (all raise the same error if not). Every
        process serializes the weights (Keras gathers replicated arrays with
        a collective: process 0 saving alone waited forever for the others,
        measured), and process 0 alone commits them and the state.
        """
        self._saves += 1
        data = self.dataset.get_state(trained)
        gather = jax_gather()
        check_workers_agree(keras_epoch, self._saves, data, gather)
        committing = gather is None or process_index() == 0
        state: dict[str, Any] = {"keras_epoch": keras_epoch, "data": data, "save_number": self._saves}
        if committing:
            self._lock()
            commit_checkpoint(self.directory, state, self.model if self.save_model else None)
        elif self.save_model:  # into this machine's temporary space, apart from the commit's leftovers
            with tempfile.TemporaryDirectory(prefix="streamfeed-worker-weights-") as scratch:
                self.model.save_weights(Path(scratch) / WEIGHTS_PATTERN.format(self._saves))


def commit_checkpoint(directory: Path, state: dict[str, Any], model: Any = None) -> None:
    """Writes ``model``'s weights (if given) and then ``state``, in the order the module docstring argues for.

    ``state`` holds ``save_number``; the weights' name is added to it.
    Shared by :class:`DataCheckpoint` and the multi-worker loop's checkpoint.
    """
    directory.mkdir(parents=True, exist_ok=True)
    pending: Path | None = None
    if model is not None:
        number = int(state["save_number"])
        state["weights"] = weights = WEIGHTS_PATTERN.format(number)
        pending = Path(tempfile.mkdtemp(dir=directory, prefix=f"{PENDING_PREFIX}{number:06d}-")) / weights
        model.save_weights(pending)
        _fsync(pending)
        state["weights_sha256"] = weights_digest(pending)
    _atomic_write_json(directory / STATE_FILE, state)  # the commit
    if pending is not None:
        _move_in_place(pending, directory / state["weights"])
    remove_leftovers(directory, keep=state.get("weights"))


def restore_weights(model: Any, directory: Path, saved: Mapping[str, Any]) -> None:
    """Loads a checkpoint's weights and optimizer variables into ``model``; StateError if they do not fit.

    The optimizer is built first: the TensorFlow backend builds it only when
    it traces the first train step, after ``on_train_begin``, and loading
    into an unbuilt optimizer skips its state (momentum, iteration count)
    with a mere warning, so the resumed run diverged from the uninterrupted one.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    weights = directory / saved["weights"]
    try:
        model.load_weights(weights)
    except (OSError, ValueError) as exc:
        raise StateError(
            describe(
                f"Cannot resume from {directory / STATE_FILE}: its weights do not load into this model",
                where=str(weights),
                expected="the weights of this model (and optimizer), as saved",
                found=f"{type(exc).__name__}: {exc}",
                fix=_FIX,
            )
        ) from exc


def remove_leftovers(directory: Path, *, keep: str | None) -> None:
    """Older weights, and what interrupted saves left (temporary directories and state files)."""
    for old in directory.glob(WEIGHTS_PATTERN.replace("{:06d}", "*")):
        if old.name != keep:
            old.unlink(missing_ok=True)
    for path in directory.glob(f"{PENDING_PREFIX}*"):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
    for path in directory.glob(f".{STATE_FILE}[.-]*.tmp"):  # files.atomic's temporary names (and older ones)
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
