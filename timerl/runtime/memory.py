"""Tensor stores and the device memory pool (paper §7): every stored point accounted in bytes.

A store keeps the outputs of one op, point by point. The pool counts the bytes of every point held on the
device, tracks the peak, and refuses an allocation past ``device_memory``. With ``swap=True`` the pool makes
room by offloading the least recently used points that the running op does not need to host memory, and
fetches them back when they are read again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from timerl.errors import DeviceOutOfMemoryError

Key = tuple[int, tuple[int, ...]]


class Timeline:
    """Device and host bytes after every store and free, in at most ``capacity`` buckets: when full, pairs of
    buckets merge (keeping each pair's maxima), so a long run keeps its shape at a coarser resolution."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self.stride = 1  # events per bucket
        self.device: list[int] = []
        self.host: list[int] = []
        self._pending = 0
        self._device_max = 0
        self._host_max = 0

    def add(self, device: int, host: int) -> None:
        if device > self._device_max:
            self._device_max = device
        if host > self._host_max:
            self._host_max = host
        self._pending += 1
        if self._pending < self.stride:
            return
        self.device.append(self._device_max)
        self.host.append(self._host_max)
        self._pending = self._device_max = self._host_max = 0
        if len(self.device) >= self.capacity:
            self.device = [max(self.device[k:k + 2]) for k in range(0, len(self.device), 2)]
            self.host = [max(self.host[k:k + 2]) for k in range(0, len(self.host), 2)]
            self.stride *= 2

    def __repr__(self) -> str:
        peak = max(self.device, default=0)
        return (f"<memory timeline: {len(self.device)} points of {self.stride} store/free event(s), "
                f"device peak {peak} bytes>")


class MemoryPool:
    def __init__(self, capacity: int | None, backend: Any, swap: bool, blocks: dict | None = None) -> None:
        self.blocks: dict[int, Any] = blocks or {}  # node id -> BlockStore (not swapped: rows are contiguous)
        self.block_bytes: dict[Key, int] = {}
        self.capacity = capacity
        self.backend = backend
        self.swap = swap
        self.device_bytes = 0
        self.host_bytes = 0
        self.peak_device_bytes = 0
        self.peak_host_bytes = 0
        self.bytes_offloaded = 0
        self.bytes_fetched = 0
        self.donated_bytes = 0
        # scheduled: statements the compiler placed; reactive: LRU evictions and fetches on a read (fallback)
        # fetches_ahead: scheduled fetches with at least one statement run between the fetch and its reader
        self.swaps = {"scheduled_offloads": 0, "scheduled_fetches": 0, "reactive_offloads": 0,
                      "reactive_fetches": 0, "fetches_ahead": 0}
        self.statements = 0  # statements started (`next_statement`)
        self.arriving: dict[Key, tuple[int, Callable[[], None] | None]] = {}  # fetched: (statement, wait for it)
        # least recently used first, when swapping chooses by it (a plain dict is cheaper: ~100 stores a move)
        self.device: dict[Key, tuple[tuple[Any, ...], int]] = OrderedDict() if swap else {}
        self.host: dict[Key, tuple[tuple[Any, ...], int]] = {}
        self.timeline = Timeline()
        self.pinned: set[Key] = set()  # read by the running group: never offloaded to make room
        self.freed_outputs: dict[Key, tuple[int, ...]] = {}  # points some of whose outputs are freed already
        self.describe: Callable[[Key], str] = lambda key: f"%{key[0]} at {key[1]}"
        self.describe_group: Callable[[int | None], str] = lambda group: f"the intermediate values of group {group}"

    # ---- storing ------------------------------------------------------------------------------------------
    def store(self, key: Key, values: tuple[Any, ...], size: int | None) -> None:
        """Keep the outputs of one point; ``size`` is their bytes when known statically."""
        if size is None:
            size = self.nbytes_of(values)
        if self.capacity is not None:
            self._reserve(size, lambda: self.describe(key), self.pinned)
        self._place(key, values, size)
        self._grown(size)

    def store_many(self, point: tuple[int, ...], entries: tuple[tuple[int, tuple[Any, ...], int | None], ...]
                   ) -> None:
        """`store` of several members' outputs at one point, each entry (member, outputs, bytes or None): a
        group's stores after its call, with one entry in the timeline (the peak is the same: stores only add)."""
        if self.capacity is not None:  # each store may have to make room first
            for member, values, size in entries:
                self.store((member, point), values, size)
            return
        total = 0
        for member, values, size in entries:
            if size is None:
                size = self.nbytes_of(values)
            self._place((member, point), values, size)
            total += size
        self._grown(total)

    def _place(self, key: Key, values: tuple[Any, ...], size: int) -> None:
        """Where a stored point's outputs go: its member's block store, or the device dict."""
        store = self.blocks.get(key[0])
        if store is None:
            self.device[key] = (values, size)
        else:
            store.put(key[1], values)
            self.block_bytes[key] = size

    def _grown(self, size: int) -> None:
        """``size`` more bytes on the device: the count, its peak and the timeline."""
        self.device_bytes += size
        if self.device_bytes > self.peak_device_bytes:
            self.peak_device_bytes = self.device_bytes
        self.timeline.add(self.device_bytes, self.host_bytes)

    def transient(self, size: int, donated: int = 0, group: int | None = None) -> None:
        """Values that live only while their group runs (read inside it, never stored): they count towards
        the peak, and must fit, but are gone when the group ends. ``donated``: bytes the group wrote into the
        buffers of inputs that died there (`timerl.runtime.fusions.buffer_donations`)."""
        self.donated_bytes += donated
        if self.capacity is not None:
            self._reserve(size, lambda: self.describe_group(group), self.pinned)
        if self.device_bytes + size > self.peak_device_bytes:
            self.peak_device_bytes = self.device_bytes + size
        self.timeline.add(self.device_bytes + size, self.host_bytes)

    def hold(self, size: int) -> None:
        """Bytes held (positive) or given back (negative) outside the stored points, e.g. random draws computed
        ahead for a row of points (`timerl.runtime.plan.DrawPrefetch`); only without a device budget."""
        self._grown(size)

    def nbytes_of(self, values: tuple[Any, ...]) -> int:
        return sum(self.backend.nbytes(v) for v in values)

    def next_statement(self) -> None:
        """A statement starts (with a budget): what the previous one read may be offloaded again."""
        self.pinned.clear()
        self.statements += 1

    def load(self, key: Key) -> tuple[Any, ...]:
        entry = self.device.get(key)
        if entry is not None:
            if self.swap:
                self.device.move_to_end(key)
                self.pinned.add(key)
                if key in self.arriving:
                    self._arrived(key)
            return entry[0]
        store = self.blocks.get(key[0])
        if store is not None:
            return store.get(key[1])
        if key not in self.host:
            raise KeyError(key)
        self.pinned.add(key)
        self.swaps["reactive_fetches"] += 1
        return self.get(key, lambda: self.describe(key), self.pinned)

    def offload(self, key: Key) -> None:
        """A scheduled offload: the point waits on the host for its next reader (nothing if it is not on
        the device, e.g. evicted already)."""
        if key in self.device:
            self._offload(key)
            self.swaps["scheduled_offloads"] += 1
            self.timeline.add(self.device_bytes, self.host_bytes)

    def fetch(self, key: Key) -> None:
        """A scheduled fetch, before the reader that needs the point, possibly some statements ahead of it
        (`timerl.sched.ast.Fetch.distance`): the copy is issued now (`fetch_ahead`: on a GPU on a stream of its
        own) and waited for when the point is read."""
        if key in self.host:
            self.get(key, lambda: self.describe(key), self.pinned, ahead=True)
            self.swaps["scheduled_fetches"] += 1
            self.timeline.add(self.device_bytes, self.host_bytes)

    def _arrived(self, key: Key) -> None:
        """The first read of a point fetched ahead: wait for its copy; count it if statements ran meanwhile."""
        fetched_at, wait = self.arriving.pop(key)
        if wait is not None:
            wait()
        if self.statements > fetched_at + 1:
            self.swaps["fetches_ahead"] += 1

    def get(self, key: Key, describe: Callable[[], str], pinned: set[Key], ahead: bool = False
            ) -> tuple[Any, ...]:
        store = self.blocks.get(key[0])
        if store is not None:
            return store.get(key[1])
        entry = self.device.get(key)
        if entry is not None:
            if self.swap:
                self.device.move_to_end(key)
            return entry[0]
        values, size = self.host.pop(key)
        self.host_bytes -= size
        self._reserve(size, describe, pinned)
        if ahead:
            fetched, wait = self.backend.fetch_ahead(values)
            self.arriving[key] = (self.statements, wait)
        else:
            fetched = tuple(None if v is None else self.backend.to_device(v) for v in values)
        self.bytes_fetched += size
        self.device[key] = (fetched, size)
        self.device_bytes += size
        self.peak_device_bytes = max(self.peak_device_bytes, self.device_bytes)
        return fetched

    def has(self, key: Key) -> bool:
        store = self.blocks.get(key[0])
        if store is not None:
            return store.has(key[1])
        return key in self.device or key in self.host

    def free(self, key: Key) -> None:
        self._drop(key)
        self.timeline.add(self.device_bytes, self.host_bytes)

    def free_many(self, keys: list[Key]) -> None:
        """`free` at every key (a vectorized deallocation), with one entry in the timeline."""
        for key in keys:
            self._drop(key)
        self.timeline.add(self.device_bytes, self.host_bytes)

    def _drop(self, key: Key) -> None:
        """The point leaves the pool (the timeline is the caller's)."""
        if self.arriving:
            self.arriving.pop(key, None)
        store = self.blocks.get(key[0])
        if store is not None:
            store.free(key[1])
            self.device_bytes -= self.block_bytes.pop(key, 0)
        else:
            entry = self.device.pop(key, None)
            if entry is not None:
                self.device_bytes -= entry[1]
            else:
                entry = self.host.pop(key, None)
                if entry is not None:
                    self.host_bytes -= entry[1]

    def free_outputs(self, key: Key, outputs: tuple[int, ...], count: int) -> None:
        """Free some of the ``count`` outputs of a point, after their own last reader (`timeline.Freed`): their
        bytes leave the pool now, the point itself once every output has been freed."""
        freed = self.freed_outputs.pop(key, ()) + outputs
        if len(freed) >= count:
            self.free(key)
            return
        self.freed_outputs[key] = freed
        self._release(key, outputs)
        self.timeline.add(self.device_bytes, self.host_bytes)

    def free_outputs_many(self, keys: list[Key], outputs: tuple[int, ...], count: int) -> None:
        """`free_outputs` at every key (a vectorized deallocation), with one entry in the timeline."""
        freed_outputs = self.freed_outputs
        for key in keys:
            freed = freed_outputs.pop(key, ()) + outputs
            if len(freed) >= count:
                self._drop(key)
            else:
                freed_outputs[key] = freed
                self._release(key, outputs)
        self.timeline.add(self.device_bytes, self.host_bytes)

    def _release(self, key: Key, outputs: tuple[int, ...]) -> None:
        store = self.blocks.get(key[0])
        if store is not None:  # accounted only: a row's buffers go when all its points do (`BlockStore`)
            if key in self.block_bytes:
                size = sum(store.output_bytes[k] for k in outputs)
                self.block_bytes[key] -= size
                self.device_bytes -= size
            return
        for table in (self.device, self.host):
            entry = table.get(key)
            if entry is None:
                continue
            values, size = entry
            released = sum(self.backend.nbytes(values[k]) for k in outputs if values[k] is not None)
            table[key] = (tuple(None if k in outputs else v for k, v in enumerate(values)), size - released)
            if table is self.device:
                self.device_bytes -= released
            else:
                self.host_bytes -= released
            return

    def live_points(self) -> int:
        return len(self.device) + len(self.host) + len(self.block_bytes)

    # ---- making room ----------------------------------------------------------------------------------------
    def _reserve(self, size: int, describe: Callable[[], str], pinned: set[Key]) -> None:
        if self.capacity is None or self.device_bytes + size <= self.capacity:
            return
        if self.swap:
            for key in list(self.device):
                if self.device_bytes + size <= self.capacity:
                    break
                if key not in pinned:
                    self._offload(key)
                    self.swaps["reactive_offloads"] += 1
        if self.device_bytes + size > self.capacity:
            needed = self.device_bytes + size
            error = DeviceOutOfMemoryError(
                f"{describe()} needs {size} bytes with {self.device_bytes} bytes in use: the program needs at "
                f"least {needed} bytes of device memory, device_memory is {self.capacity}"
                + ("" if self.swap else " (swap=True may help)"))
            error.in_use, error.size = self.device_bytes, size
            raise error

    def _offload(self, key: Key) -> None:
        arriving = self.arriving.pop(key, None)
        if arriving is not None and arriving[1] is not None:  # fetched ahead, never read: its copy first
            arriving[1]()
        values, size = self.device.pop(key)
        self.device_bytes -= size
        self.host[key] = (tuple(None if v is None else self.backend.to_host(v) for v in values), size)
        self.host_bytes += size
        self.bytes_offloaded += size
        self.peak_host_bytes = max(self.peak_host_bytes, self.host_bytes)
