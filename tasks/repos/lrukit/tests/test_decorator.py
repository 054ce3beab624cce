from lrukit import CacheInfo, cached, make_key


def test_caches_results():
    calls = []

    @cached(maxsize=10)
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9
    assert square(3) == 9
    assert calls == [3]
    assert square.cache_info() == CacheInfo(hits=1, misses=1, maxsize=10, currsize=1)


def test_keyword_arguments():
    @cached()
    def greet(name, greeting="hello"):
        return f"{greeting} {name}"

    assert greet("ada", greeting="hi") == "hi ada"
    assert greet("ada", greeting="hey") == "hey ada"


def test_cache_clear():
    @cached()
    def identity(x):
        return x

    identity(1)
    identity(1)
    identity.cache_clear()
    assert identity.cache_info() == CacheInfo(hits=0, misses=0, maxsize=128, currsize=0)


def test_typed_keys_differ():
    assert make_key((1,), {}, typed=True) != make_key((1.0,), {}, typed=True)
    assert make_key((1,), {}) == make_key((1.0,), {})


def test_eviction_through_decorator():
    calls = []

    @cached(maxsize=2)
    def double(x):
        calls.append(x)
        return 2 * x

    for x in (1, 2, 3, 1):
        double(x)
    assert calls == [1, 2, 3, 1]


def test_wraps_metadata():
    @cached()
    def documented():
        """Docstring."""

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Docstring."
