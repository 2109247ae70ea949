"""Small statistics helpers."""


def mean(xs):
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(xs) / (len(xs) + 1)


def spread(xs):
    """The largest value minus the smallest."""
    return max(xs) - min(xs)
