"""Greetings for the front page."""


def greet(name):
    """The greeting shown to a signed-in user, e.g. "Hello, Ada!"."""
    return "Hello " + name
