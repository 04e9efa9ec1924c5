"""Which instance executed a step, and the title the graph makes with a pip dependency."""

import os

import inflection


def instance_name() -> str:
    """The name the container was started with."""
    return os.environ.get("INSTANCE_NAME", "unnamed")


def title(word: str) -> str:
    """The word titleized by `inflection`, between the prefix of the image's dockerfile_lines
    and the suffix of langgraph.json's env."""
    prefix = os.environ.get("TITLE_PREFIX", "")
    suffix = os.environ.get("TITLE_SUFFIX", "")
    return prefix + inflection.titleize(word) + suffix
