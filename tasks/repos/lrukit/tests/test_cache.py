import pytest

from lrukit import LRUCache


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_get_and_put():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("missing") is None
    assert cache.get("missing", 0) == 0


def test_evicts_least_recently_used():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]
    assert cache.stats.evictions == 1


def test_get_refreshes_recency():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]


def test_put_overwrites_value():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("a", 10)
    assert cache.get("a") == 10
    assert len(cache) == 1


def test_unbounded():
    cache = LRUCache(maxsize=None)
    for index in range(1000):
        cache.put(index, index)
    assert len(cache) == 1000


def test_rejects_negative_maxsize():
    with pytest.raises(ValueError, match="maxsize"):
        LRUCache(maxsize=-1)


def test_stats_hits_and_misses():
    cache = LRUCache()
    cache.put("a", 1)
    cache.get("a")
    cache.get("b")
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)


def test_ttl_expiry_on_get():
    clock = FakeClock()
    cache = LRUCache(ttl=10, clock=clock)
    cache.put("a", 1)
    clock.now = 9.9
    assert cache.get("a") == 1
    clock.now = 10.0
    assert cache.get("a") is None
    assert cache.stats.expirations == 1
    assert len(cache) == 0


def test_put_resets_ttl():
    clock = FakeClock()
    cache = LRUCache(ttl=10, clock=clock)
    cache.put("a", 1)
    clock.now = 8
    cache.put("a", 2)
    clock.now = 15
    assert cache.get("a") == 2


def test_pop_returns_value():
    cache = LRUCache()
    cache.put("a", 1)
    assert cache.pop("a") == 1
    assert "a" not in cache
    assert len(cache) == 0


def test_pop_missing():
    cache = LRUCache()
    assert cache.pop("a", None) is None
    with pytest.raises(KeyError):
        cache.pop("a")


def test_clear():
    cache = LRUCache()
    cache.put("a", 1)
    cache.clear()
    assert len(cache) == 0
    assert cache.keys() == []
