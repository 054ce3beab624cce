"""The LRU cache."""

import time
from dataclasses import dataclass

from lrukit.linked import LinkedList, Node

_MISSING = object()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    expirations: int = 0


class LRUCache:
    """Mapping-like cache that evicts the least recently used entry when full.

    ``maxsize=None`` is unbounded and ``maxsize=0`` stores nothing. With ``ttl`` (seconds),
    an entry expires ``ttl`` seconds after it was last written; ``clock`` gives the time.
    """

    def __init__(self, maxsize=128, ttl=None, clock=time.monotonic):
        if maxsize is not None and maxsize < 0:
            raise ValueError(f"maxsize must be >= 0 or None, got {maxsize}")
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be > 0 or None, got {ttl}")
        self.maxsize = maxsize
        self.ttl = ttl
        self._clock = clock
        self._nodes = {}
        self._order = LinkedList()
        self.stats = CacheStats()

    def __len__(self):
        return len(self._nodes)

    def __contains__(self, key):
        return key in self._nodes

    def _expired(self, node):
        return node.expires is not None and self._clock() >= node.expires

    def _drop(self, node):
        self._order.unlink(node)
        del self._nodes[node.key]

    def get(self, key, default=None):
        node = self._nodes.get(key)
        if node is not None and self._expired(node):
            self._drop(node)
            self.stats.expirations += 1
            node = None
        if node is None:
            self.stats.misses += 1
            return default
        self.stats.hits += 1
        self._order.move_to_end(node)
        return node.value

    def put(self, key, value):
        expires = None if self.ttl is None else self._clock() + self.ttl
        node = self._nodes.get(key)
        if node is not None:
            node.value = value
            node.expires = expires
            return
        while self.maxsize is not None and len(self._nodes) >= self.maxsize:
            evicted = self._order.popleft()
            del self._nodes[evicted.key]
            self.stats.evictions += 1
        node = Node(key, value, expires)
        self._nodes[key] = node
        self._order.append(node)

    def pop(self, key, default=_MISSING):
        node = self._nodes.pop(key, None)
        if node is None or self._expired(node):
            if default is _MISSING:
                raise KeyError(key)
            return default
        return node.value

    def keys(self):
        """Keys from least to most recently used (expired entries included until touched)."""
        return [node.key for node in self._order]

    def clear(self):
        self._nodes.clear()
        self._order.clear()
