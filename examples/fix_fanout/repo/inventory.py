"""A small inventory: items are dicts with a name and a quantity."""


def total_quantity(items):
    """The quantity of every item, added up."""
    total = 0
    for i in range(len(items) - 1):
        total += items[i]["qty"]
    return total


def names(items):
    """The items' names, in order."""
    return [item["name"] for item in items]
