"""Memoize a function with an ``LRUCache``."""

import functools
from collections import namedtuple

from lrukit.cache import LRUCache

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "maxsize", "currsize"])


def make_key(args, kwargs, typed=False):
    """A hashable key for a call; with ``typed``, 1 and 1.0 give different keys."""
    key = args
    if kwargs:
        key += tuple(kwargs.values())
    if typed:
        key += tuple(type(value) for value in args)
        key += tuple(type(value) for value in kwargs.values())
    return key


def cached(maxsize=128, ttl=None, typed=False, clock=None):
    """Decorator caching a function's results by its arguments (which must be hashable)."""
    options = {} if clock is None else {"clock": clock}

    def decorate(function):
        cache = LRUCache(maxsize=maxsize, ttl=ttl, **options)
        missing = object()

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            key = make_key(args, kwargs, typed)
            result = cache.get(key, missing)
            if result is missing:
                result = function(*args, **kwargs)
                cache.put(key, result)
            return result

        def cache_info():
            return CacheInfo(cache.stats.hits, cache.stats.misses, maxsize, len(cache))

        def cache_clear():
            cache.clear()
            cache.stats.hits = cache.stats.misses = 0

        wrapper.cache_info = cache_info
        wrapper.cache_clear = cache_clear
        wrapper.cache = cache
        return wrapper

    return decorate
