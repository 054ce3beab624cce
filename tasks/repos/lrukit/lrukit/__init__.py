"""An LRU cache with optional expiry, and a memoizing decorator."""

from lrukit.cache import CacheStats, LRUCache
from lrukit.decorator import CacheInfo, cached, make_key

__all__ = ["CacheInfo", "CacheStats", "LRUCache", "cached", "make_key"]
