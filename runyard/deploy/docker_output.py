"""What a failed `docker build` or `docker compose up` said, read for what the user can do.

Two failures send a first-time user in circles: an image registry that cannot be reached
(no network to Docker Hub, a registry mirror only) and a TLS-inspecting proxy whose
certificate the image's pip does not trust. Docker reports both deep in its output; the
command then names the way out: `runyard base-images` or `--offline` for the first,
`--ca-certificates` for the second.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

# The docker daemon (or BuildKit) could not reach the registry to pull an image.
_REGISTRY = re.compile(
    r"no such host|Temporary failure in name resolution|TLS handshake timeout"
    r"|dial tcp [^ ]+: (?:i/o timeout|connect: connection refused|connect: network is unreachable)"
    r"|request canceled while waiting for connection|server misbehaving",
    re.IGNORECASE,
)
# The daemon does not trust the certificate the registry (or a proxy in front) shows.
_DAEMON_X509 = re.compile(r"x509: certificate (?:signed by unknown authority|is not valid)", re.I)
# A download inside the build (pip, apt, curl) did not trust a certificate.
_BUILD_CERTIFICATES = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|self[- ]signed certificate in "
    r"certificate chain|unable to get local issuer certificate",
    re.IGNORECASE,
)
# Lines of output kept to read once the command has failed.
TAIL_LINES = 400


@dataclass(frozen=True)
class Finished:
    """A command's exit code and the last lines it printed."""

    returncode: int
    tail: str


def run_showing_output(args: Sequence[str]) -> Finished:
    """Run a docker command with its output shown as it comes, and kept to be read."""
    kept: deque[str] = deque(maxlen=TAIL_LINES)
    with subprocess.Popen(
        list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line)
    return Finished(process.returncode, "".join(kept))


def failure_hint(output: str) -> str | None:
    """What to do about the failure `output` shows, or None when it is none of the known
    ones. The line that shows it is quoted."""
    for line in output.splitlines():
        if _REGISTRY.search(line) or _DAEMON_X509.search(line):
            return registry_hint(line.strip())
    for line in output.splitlines():
        if _BUILD_CERTIFICATES.search(line):
            return certificates_hint(line.strip())
    return None


def registry_hint(line: str) -> str:
    """The way out when the image registry cannot be reached."""
    return (
        f"the image registry could not be reached ({_short(line)}). Without a registry, "
        "build the base, PostgreSQL, Redis and nginx images from Debian packages: "
        "`runyard up --offline` does it and uses them, or run `runyard base-images` (as "
        "root) once and pass the flags it prints"
    )


def certificates_hint(line: str) -> str:
    """The way out when a download inside the build does not trust a certificate."""
    return (
        f"a download inside the image failed to verify a certificate ({_short(line)}), as "
        "behind a TLS-inspecting proxy. Run again with --ca-certificates to trust this "
        "machine's CA bundle in the image, or --ca-certificates PATH for another bundle"
    )


def _short(line: str, limit: int = 240) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
