"""Tasks for tasks/repos/lrukit (see tasks/build_suite.py for the format)."""

TASKS = [
    dict(
        number=1,
        difficulty="easy",
        summary="updating an existing key with put() does not make it most recently used",
        created_at="2024-04-02T09:00:00Z",
        problem_statement='''
Re-putting a key does not refresh it, so it gets evicted first

The README says "Reading (`get`) and writing (`put`) both count as a use", but writing an
existing key does not protect it from eviction:

```python
>>> from lrukit import LRUCache
>>> cache = LRUCache(maxsize=2)
>>> cache.put("a", 1)
>>> cache.put("b", 2)
>>> cache.put("a", 10)     # "a" was just used
>>> cache.put("c", 3)      # should evict "b"
>>> cache.keys()
['b', 'c']
>>> cache.get("a")
>>>
```

Expected `cache.keys() == ['a', 'c']` and `cache.get("a") == 10`. We use the cache for
session tokens that are refreshed with `put`, and active sessions keep getting dropped.
''',
        fix=[
            (
                "lrukit/cache.py",
                "            node.value = value\n            node.expires = expires\n            return\n",
                "            node.value = value\n            node.expires = expires\n"
                "            self._order.move_to_end(node)\n            return\n",
            )
        ],
        tests={
            "tests/test_cache.py": '''
def test_put_existing_key_refreshes_recency():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.get("a") == 10
''',
        },
    ),
    dict(
        number=2,
        difficulty="easy",
        summary="`key in cache` is True for entries whose ttl has expired",
        created_at="2024-04-05T11:30:00Z",
        problem_statement='''
Membership test ignores ttl

```python
>>> import time
>>> from lrukit import LRUCache
>>> cache = LRUCache(ttl=0.1)
>>> cache.put("token", "abc")
>>> time.sleep(0.2)
>>> "token" in cache
True
>>> cache.get("token")
>>>
```

`get` correctly treats the entry as expired, but `in` still says it is there, so code
like `if key in cache: return cache.get(key)` returns `None`. The README says expired
entries "behave exactly like missing ones"; expected `"token" in cache` to be `False`
once the ttl has passed.
''',
        fix=[
            (
                "lrukit/cache.py",
                "    def __contains__(self, key):\n        return key in self._nodes\n",
                "    def __contains__(self, key):\n        node = self._nodes.get(key)\n"
                "        return node is not None and not self._expired(node)\n",
            )
        ],
        tests={
            "tests/test_cache.py": '''
def test_contains_respects_ttl():
    clock = FakeClock()
    cache = LRUCache(ttl=10, clock=clock)
    cache.put("token", "abc")
    clock.now = 5
    assert "token" in cache
    clock.now = 10
    assert "token" not in cache
    assert cache.get("token") is None
''',
        },
    ),
    dict(
        number=3,
        difficulty="medium",
        summary="@cached returns a stale result when calls differ only in keyword names",
        created_at="2024-04-09T14:45:00Z",
        problem_statement='''
@cached mixes up calls with different keyword arguments

```python
>>> from lrukit import cached
>>> @cached()
... def power(base=2, exp=2):
...     return base ** exp
...
>>> power(base=3)
9
>>> power(exp=3)
9
```

`power(exp=3)` is `2 ** 3 == 8`, but the cached result of `power(base=3)` is returned.
It looks like only the values of keyword arguments are taken into account, not their
names. Expected each distinct call to be computed (and `power.cache_info().misses == 2`
after the two calls above).
''',
        fix=[
            (
                "lrukit/decorator.py",
                'CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "maxsize", "currsize"])\n',
                'CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "maxsize", "currsize"])\n'
                "# Separates positional from keyword arguments in a key: f((\"a\", 1)) != f(a=1).\n"
                "_KWARGS_MARK = object()\n",
            ),
            (
                "lrukit/decorator.py",
                "        key += tuple(kwargs.values())\n",
                "        key += (_KWARGS_MARK, *kwargs.items())\n",
            ),
        ],
        tests={
            "tests/test_decorator.py": '''
def test_keyword_names_are_part_of_the_key():
    @cached()
    def power(base=2, exp=2):
        return base**exp

    assert power(base=3) == 9
    assert power(exp=3) == 8
    assert power.cache_info().misses == 2


def test_make_key_distinguishes_keyword_names():
    assert make_key((), {"a": 1}) != make_key((), {"b": 1})
''',
        },
    ),
    dict(
        number=4,
        difficulty="medium",
        summary="@cached(maxsize=0) crashes with IndexError instead of disabling caching",
        created_at="2024-04-12T10:20:00Z",
        problem_statement='''
cached(maxsize=0) raises IndexError

We turn caching off in tests with `maxsize=0`, which the README documents as "disables
caching (like `functools.lru_cache`)". The first call crashes:

```python
>>> from lrukit import cached
>>> @cached(maxsize=0)
... def load(name):
...     return name.upper()
...
>>> load("x")
Traceback (most recent call last):
  ...
IndexError: pop from an empty list
```

`LRUCache(maxsize=0).put("a", 1)` fails the same way. Expected: the function is called
every time and its result returned, nothing is stored (`len(cache) == 0`,
`load.cache_info().currsize == 0`), and each call counts as a miss.
''',
        fix=[
            (
                "lrukit/cache.py",
                "    def put(self, key, value):\n",
                "    def put(self, key, value):\n        if self.maxsize == 0:\n            return\n",
            )
        ],
        tests={
            "tests/test_cache.py": '''
def test_maxsize_zero_stores_nothing():
    cache = LRUCache(maxsize=0)
    cache.put("a", 1)
    assert len(cache) == 0
    assert cache.get("a") is None
''',
            "tests/test_decorator.py": '''
def test_maxsize_zero_disables_caching():
    calls = []

    @cached(maxsize=0)
    def load(name):
        calls.append(name)
        return name.upper()

    assert load("x") == "X"
    assert load("x") == "X"
    assert calls == ["x", "x"]
    info = load.cache_info()
    assert (info.hits, info.misses, info.currsize) == (0, 2, 0)
''',
        },
    ),
    dict(
        number=5,
        difficulty="medium",
        summary="after pop() the key stays in keys() and a later eviction raises KeyError",
        created_at="2024-04-18T16:05:00Z",
        problem_statement='''
KeyError from put() after pop()

After removing an entry with `pop`, filling the cache crashes:

```python
>>> from lrukit import LRUCache
>>> cache = LRUCache(maxsize=2)
>>> cache.put("a", 1)
>>> cache.put("b", 2)
>>> cache.pop("a")
1
>>> cache.keys()
['a', 'b']
>>> cache.put("c", 3)
>>> cache.put("d", 4)
Traceback (most recent call last):
  ...
KeyError: 'a'
```

Expected `cache.keys()` to be `['b']` right after the pop, and the two puts to succeed
leaving `['c', 'd']` (with "b" evicted). `len(cache)` already reports the right size.
''',
        fix=[
            (
                "lrukit/cache.py",
                "        node = self._nodes.pop(key, None)\n",
                "        node = self._nodes.pop(key, None)\n"
                "        if node is not None:\n"
                "            self._order.unlink(node)\n",
            )
        ],
        tests={
            "tests/test_cache.py": '''
def test_pop_then_fill_evicts_correctly():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.pop("a") == 1
    assert cache.keys() == ["b"]
    cache.put("c", 3)
    cache.put("d", 4)
    assert cache.keys() == ["c", "d"]
    assert cache.stats.evictions == 1


def test_pop_expired_entry_is_removed():
    clock = FakeClock()
    cache = LRUCache(ttl=1, clock=clock)
    cache.put("a", 1)
    clock.now = 2
    assert cache.pop("a", "gone") == "gone"
    assert cache.keys() == []
''',
        },
    ),
]
