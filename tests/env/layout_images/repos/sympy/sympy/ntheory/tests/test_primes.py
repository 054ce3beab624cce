from sympy import isprime, nextprime


def test_isprime():
    assert isprime(2) and isprime(13)
    assert not isprime(1) and not isprime(9)


def test_nextprime_of_composite():
    assert nextprime(8) == 11
