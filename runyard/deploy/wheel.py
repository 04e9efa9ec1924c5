"""A wheel of the running Runyard, so an image installs exactly the Runyard that built it."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path

import runyard
from runyard.domain.errors import ConfigError

PACKAGE_SUFFIXES = (".py", ".mako", ".typed")


def runyard_version() -> str:
    """The installed Runyard's version."""
    return metadata.version("runyard")


def runyard_requirements() -> list[str]:
    """What the installed Runyard needs at run time (its requirements without extras)."""
    return [r for r in metadata.requires("runyard") or [] if "extra ==" not in r]


def wheel_name() -> str:
    """The file name of the wheel `write_runyard_wheel` makes."""
    return f"runyard-{runyard_version()}-py3-none-any.whl"


def write_runyard_wheel(folder: Path) -> Path:
    """Write a wheel of the imported `runyard` package (editable or not) into `folder`.

    The files are the package's own (its migrations included), the metadata that of the
    installed distribution (requirements, entry points), so no build tool or network is
    needed and an editable checkout packs what it would run.
    """
    folder.mkdir(parents=True, exist_ok=True)
    dist = metadata.distribution("runyard")
    version = dist.version
    info = f"runyard-{version}.dist-info"
    package_dir = Path(runyard.__file__).resolve().parent
    entries: list[tuple[str, bytes]] = []
    for path in sorted(package_dir.rglob("*")):
        if path.is_file() and path.suffix in PACKAGE_SUFFIXES and "__pycache__" not in path.parts:
            name = f"runyard/{path.relative_to(package_dir).as_posix()}"
            entries.append((name, path.read_bytes()))
    # An egg-info (a setuptools build in a checkout) names the same metadata PKG-INFO.
    meta = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not meta:
        raise ConfigError("the installed Runyard has no metadata; reinstall it (pip install)")
    entries.append((f"{info}/METADATA", meta.encode()))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        entries.append((f"{info}/entry_points.txt", entry_points.encode()))
    wheel_meta = (
        "Wheel-Version: 1.0\nGenerator: runyard\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    entries.append((f"{info}/WHEEL", wheel_meta.encode()))
    record = "".join(f"{name},sha256={_digest(data)},{len(data)}\n" for name, data in entries)
    record += f"{info}/RECORD,,\n"
    target = folder / wheel_name()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(_stable(name), data)
        archive.writestr(_stable(f"{info}/RECORD"), record)
    return target


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _stable(name: str) -> zipfile.ZipInfo:
    # A fixed timestamp makes the same sources give the same bytes: the image layer that
    # installs the wheel stays cached between builds.
    entry = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    entry.compress_type = zipfile.ZIP_DEFLATED
    entry.external_attr = 0o644 << 16
    return entry
