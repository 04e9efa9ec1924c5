"""Loading the `Auth` object named by `auth.path` in langgraph.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from runyard.auth.handlers import load_auth
from runyard.domain.errors import ConfigError
from runyard.project.config import ProjectConfig


def project(tmp_path: Path, auth: dict[str, str] | None) -> ProjectConfig:
    """A config file in tmp_path with no graphs and the given auth entry."""
    return ProjectConfig(path=tmp_path / "langgraph.json", graphs={}, auth=auth)


def test_no_auth_entry_leaves_the_server_open_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="runyard.auth"):
        assert load_auth(project(tmp_path, None)) is None
    assert "auth_disabled" in caplog.text


def test_the_auth_objects_handlers_are_loaded(tmp_path: Path) -> None:
    (tmp_path / "auth.py").write_text(
        "from langgraph_sdk import Auth\n"
        "auth = Auth()\n"
        "@auth.authenticate\n"
        "async def who(authorization: str) -> str:\n"
        "    return authorization\n"
        "@auth.on.threads.create\n"
        "async def stamp(ctx, value):\n"
        "    return None\n"
    )
    handlers = load_auth(project(tmp_path, {"path": "./auth.py:auth"}))
    assert handlers is not None
    assert handlers.authenticate is not None and handlers.authenticate.__name__ == "who"
    assert [(key, h.__name__) for key, h in handlers.by_action.items()] == [
        (("threads", "create"), "stamp")
    ]
    assert handlers.fallback is None


@pytest.mark.parametrize(
    ("source", "path", "named"),
    [
        (None, "./missing.py:auth", "missing.py"),
        ("auth = 1\n", "./auth.py:auth", "auth.py:auth"),
        ("from langgraph_sdk import Auth\nauth = Auth()\n", "./auth.py:other", "auth.py:other"),
        ("raise RuntimeError('boom')\n", "./auth.py:auth", "boom"),
        (None, "./auth.py", "path/to/file.py:attribute"),
    ],
)
def test_a_broken_auth_path_fails_naming_file_and_attribute(
    tmp_path: Path, source: str | None, path: str, named: str
) -> None:
    if source is not None:
        (tmp_path / "auth.py").write_text(source)
    with pytest.raises(ConfigError) as caught:
        load_auth(project(tmp_path, {"path": path}))
    assert named in caught.value.message
