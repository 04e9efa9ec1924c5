"""Tools of the sample project's graph."""


def shout(text: str) -> str:
    """The text in capitals with an exclamation mark."""
    return text.upper() + "!"
