"""One loader for the objects a config names by `path` (auth, encryption, priority): every
section resolves its file from the config file's folder, whatever the working directory,
and refuses a malformed path or a wrong object the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from runyard.auth.handlers import declared_handlers
from runyard.domain.errors import ConfigError
from runyard.project.config import ProjectConfig
from runyard.project.encryption_loading import load_encryption
from runyard.project.priority import PriorityAssigner

# The SDK marks its Encryption and Priority APIs beta, with a warning at each construction.
pytestmark = [
    pytest.mark.filterwarnings("ignore::langgraph_sdk.encryption.LangGraphBetaWarning"),
]

OBJECTS = {
    "auth": "from langgraph_sdk import Auth\nobj = Auth()\n"
    "@obj.authenticate\nasync def who(authorization: str) -> str:\n    return authorization\n",
    "encryption": "from langgraph_sdk import Encryption\nobj = Encryption()\n",
    "priority": "from langgraph_sdk.priority import Priority\nobj = Priority()\n"
    "@obj.assign\nasync def assign(ctx):\n    return {'priority': 1}\n",
}


def load(section: str, config: ProjectConfig) -> object:
    if section == "auth":
        return declared_handlers(config)
    if section == "encryption":
        return load_encryption(config)
    return PriorityAssigner.load(config)


def config_in(folder: Path, section: str, path: str) -> ProjectConfig:
    return ProjectConfig(path=folder / "langgraph.json", graphs={}, **{section: {"path": path}})


@pytest.mark.parametrize("section", sorted(OBJECTS))
def test_each_section_loads_from_the_config_files_folder(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / f"{section}_object.py").write_text(OBJECTS[section])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load(section, config_in(project, section, f"./src/{section}_object.py:obj")) is not None


@pytest.mark.parametrize("section", sorted(OBJECTS))
def test_each_section_refuses_a_malformed_path_and_a_wrong_object(
    section: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=f"{section}.path must be 'path/to/file.py:attribute'"):
        load(section, config_in(tmp_path, section, "no_attribute.py"))
    (tmp_path / "wrong.py").write_text("obj = 42\n")
    with pytest.raises(ConfigError, match=rf"{section}\.path: .*wrong\.py:obj must be a "):
        load(section, config_in(tmp_path, section, "wrong.py:obj"))
