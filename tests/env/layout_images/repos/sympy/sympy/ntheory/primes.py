def isprime(n):
    """Whether the integer `n` is prime."""
    if n < 2:
        return False
    return all(n % d for d in range(2, int(n**0.5) + 1))


def nextprime(n):
    """The smallest prime greater than `n`."""
    candidate = n
    while not isprime(candidate):
        candidate += 1
    return candidate
