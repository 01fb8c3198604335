"""The reliable-list layout's batched walks, parsed and raw
(:class:`RawWindows`, a mixin of
:class:`~jobctl.layouts.reliable_list.layout.ReliableList`): lists walked
from the tail (``position`` counts from it), zsets by rank (``score``), one
range read and one ``MGET`` a window."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from jobctl.keys import ReliableListKeys
from jobctl.model import JobRecord, State
from jobctl.layouts.common import score_ms, text
from jobctl.layouts.raw import RawWindow
from jobctl.layouts.walks import walk_list, walk_zset

__all__ = ["RawWindows"]


class RawWindows:
    """The walks of a :class:`~jobctl.layouts.reliable_list.layout.ReliableList`
    (it provides ``client``, ``shards``, ``check_supported``, ``_state_keys``,
    ``_shard_label`` and ``_records_from``)."""

    def iter_batches_of(self, keys: ReliableListKeys, state: State, batch: int = 1000,
                        sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """:meth:`iter_batches` for one shard.  Lists are walked from the tail
        (``position`` counts from it); zsets by rank (``score`` set)."""
        for ids, raws, attr, values in self._raw_walk(keys, state, batch, sample):
            yield self._records_from(keys, ids, raws, state, [{attr: v} for v in values])

    def iter_raw_windows(self, state: State, batch: int = 1000) -> Iterator[RawWindow]:
        """The windows of :meth:`iter_batches` (same order, same reads: one
        range read and one ``MGET`` each), unparsed: ids and payload values
        as stored, for readers that parse only what they need (export)."""
        self.check_supported(state)
        for keys in self.shards:
            for ids, raws, attr, values in self._raw_walk(keys, state, batch, None):
                yield RawWindow(state=state, shard=self._shard_label(keys), ids=ids, raws=raws,
                                positions=values if attr == "position" else None,
                                scores=values if attr == "score" else None,
                                records=partial(self._window_records, keys, ids, raws, state, attr, values))

    def _window_records(self, keys: ReliableListKeys, ids: list[str], raws: list[bytes | None], state: State,
                        attr: str, values: list[int], part: slice = slice(None)) -> list[JobRecord]:
        """The records of a raw window's jobs in ``part``."""
        return self._records_from(keys, ids[part], raws[part], state, [{attr: v} for v in values[part]])

    def _raw_walk(self, keys: ReliableListKeys, state: State, batch: int, sample: tuple[int, int] | None
                  ) -> Iterator[tuple[list[str], list[bytes | None], str, list[int]]]:
        """``(ids, payload values, "position" or "score", positions or scores)`` per window."""
        prefix = keys.job_prefix.encode("utf-8", "surrogateescape")

        def window(members: list, attr: str, values: list[int]):
            # payload keys as bytes: the id's exact bytes, and no encoding work in the packer
            names = [prefix + m if isinstance(m, bytes) else keys.job(m) for m in members]
            return [text(m) for m in members], (self.client.mget(names) if names else []), attr, values

        for key in self._state_keys(keys, state):
            if state in (State.SCHEDULED, State.SUPPRESSED):
                for _, pairs in walk_zset(self.client, key, batch=batch, sample=sample):
                    yield window([m for m, _ in pairs], "score", [score_ms(sc) for _, sc in pairs])
                continue
            if state is not State.DEAD and sample is None:  # workers pop and push while it is read
                yield from self._live_windows(keys, key, batch, window)
                continue
            # walk from the tail with negative indexes: LPUSHes at the head
            # during the walk do not shift them.  Dead: the hold, then the
            # dead list, positions counted on from the hold's.
            base = self.client.llen(key) if key == keys.hold and state is State.DEAD else 0
            for start, chunk in walk_list(self.client, key, from_right=True, batch=batch, sample=sample):
                yield window(chunk, "position", list(range(start, start + len(chunk))))
            if base:
                offset = base
                for start, chunk in walk_list(self.client, keys.dead, from_right=True, batch=batch, sample=sample):
                    yield window(chunk, "position", list(range(offset + start, offset + start + len(chunk))))
                return

    def _live_windows(self, keys: ReliableListKeys, key: str, batch: int, window):
        """The windows of a list workers change (:func:`.live_walk.walk_live_list`):
        each element read once; an id whose payload was gone when read and
        that the list no longer holds was taken meanwhile, and is left out."""
        from jobctl.layouts.reliable_list.live_walk import still_listed, walk_live_list

        for start, chunk in walk_live_list(self.client, key, batch=batch):
            ids, raws, attr, positions = window(chunk, "position", list(range(start, start + len(chunk))))
            gone = [m for m, raw in zip(chunk, raws) if raw is None]
            if gone:
                kept = still_listed(self.client, key, start, gone, batch)
                rows = [n for n, (m, raw) in enumerate(zip(chunk, raws)) if raw is not None or m in kept]
                ids, raws, positions = [ids[n] for n in rows], [raws[n] for n in rows], [positions[n] for n in rows]
            if ids:
                yield ids, raws, attr, positions
