"""Handing the newest item from one thread to another without ever queueing.

A producer faster than its consumer overwrites the item not yet taken and the overwrite is
counted: the consumer always gets the newest, memory never grows, and what was skipped is known.
"""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class NewestSlot(Generic[T]):
    """One slot between a producer thread and a consumer thread.

    Attributes:
        overwritten: items put over one not yet taken (the consumer never saw them).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: T | None = None
        self._closed = False
        self.overwritten = 0

    def put(self, item: T) -> bool:
        """Offer ``item``; True when it replaced an item not yet taken."""
        with self._cond:
            replaced = self._item is not None
            self._item = item
            self.overwritten += replaced
            self._cond.notify()
        return replaced

    def get(self, timeout: float) -> T | None:
        """The newest item (taking it), waiting up to ``timeout`` s; None when none came or the
        slot is closed and empty."""
        with self._cond:
            if self._item is None and not self._closed:
                self._cond.wait(timeout)
            item, self._item = self._item, None
        return item

    def close(self) -> None:
        """No more items: a waiting :meth:`get` returns at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def finished(self) -> bool:
        """Closed and nothing left to take."""
        with self._cond:
            return self._closed and self._item is None


class KeyedSlots(Generic[T]):
    """One :class:`NewestSlot`-like slot per key behind one condition: a consumer takes the
    newest item of every key at once (a slow sink fed several subjects' poses)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: dict[str, T] = {}
        self._closed = False
        self.overwritten = 0

    def put(self, key: str, item: T) -> None:
        with self._cond:
            self.overwritten += key in self._items
            self._items[key] = item
            self._cond.notify()

    def take(self, timeout: float) -> list[T]:
        """The newest item of each key that has one (empty after ``timeout`` s or once closed)."""
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            items, self._items = list(self._items.values()), {}
        return items

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class FrameQueue(Generic[T]):
    """A first-in first-out handoff holding at most ``size`` items: for a source whose own thread
    receives frames (a network client's callback) and whose reader takes each in order. When the
    reader falls ``size`` items behind, the oldest is discarded and counted (``overwritten``):
    memory stays bounded, and the reader still never sees frames out of order. Same interface as
    :class:`NewestSlot`."""

    def __init__(self, size: int) -> None:
        self._cond = threading.Condition()
        self._items: collections.deque[T] = collections.deque()
        self._size = int(size)
        self._closed = False
        self.overwritten = 0

    def put(self, item: T) -> bool:
        """Append ``item``; True when the oldest item had to go to make room."""
        with self._cond:
            full = len(self._items) >= self._size
            if full:
                self._items.popleft()
                self.overwritten += 1
            self._items.append(item)
            self._cond.notify()
        return full

    def get(self, timeout: float) -> T | None:
        """The oldest item (taking it), waiting up to ``timeout`` s; None when none came or the
        queue is closed and empty."""
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            return self._items.popleft() if self._items else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def finished(self) -> bool:
        with self._cond:
            return self._closed and not self._items
