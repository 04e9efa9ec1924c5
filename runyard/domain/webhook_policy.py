"""Which webhook URLs and addresses the server may call: LangGraph's `webhooks.url` rules
plus Runyard's safe defaults (no loopback, private, link-local or unspecified address).

Pure: the caller resolves names and hands the addresses to `check_address`. The messages
start as the official server's do (`Webhook host blocked: loopback IP range`) and then
name the rule and what to change.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass

from runyard.domain.errors import InvalidInputError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Control characters, whitespace and backslashes have no place in a URL we send: CR/LF would
# inject headers, and parsers disagree about the others.
_UNSAFE_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_LOCALHOST_NAMES = frozenset({"localhost", "localhost.localdomain", "host.docker.internal"})
_METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata.amazonaws.com", "metadata", "instance-data"}
)
_METADATA_IPS = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200")
) | {ipaddress.ip_address("fd00:ec2::254")}
_K8S_SUFFIX = ".svc.cluster.local"


def _nets(*cidrs: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


_UNSPECIFIED = _nets("0.0.0.0/8", "::/128")
_LINK_LOCAL = _nets("169.254.0.0/16", "fe80::/10")
_LOOPBACK = _nets("127.0.0.0/8", "::1/128")
_PRIVATE = _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
# Never a receiver: protocol assignments, documentation, benchmarking, multicast, reserved,
# broadcast, IPv4-compatible IPv6, NAT64 discovery, Teredo, site-local.
_RESERVED = _nets(
    "192.0.0.0/24",
    "192.0.2.0/24",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/96",
    "64:ff9b:1::/48",
    "2001::/32",
    "fec0::/10",
    "ff00::/8",
)
# IPv6 forms that carry an IPv4 address in their last 32 bits, and reach it: NAT64's
# well-known prefix and IPv4-translated addresses (::ffff:0:a.b.c.d, RFC 2765). IPv4-mapped
# ones (::ffff:a.b.c.d) are `ipv4_mapped`; the local-use NAT64 prefix (64:ff9b:1::/48) and
# IPv4-compatible ones (::a.b.c.d) are refused whole above.
_CARRIES_IPV4 = _nets("64:ff9b::/96", "::ffff:0:0:0/96")

LOOPBACK_HINT = "set webhooks.url.disable_loopback to false in langgraph.json to allow it"
PRIVATE_HINT = "set webhooks.url.disable_private_ips to false in langgraph.json to allow it"
NEVER_HINT = "no policy allows this address as a webhook target"


class WebhookRefusedError(InvalidInputError):
    """A webhook URL, or an address it resolves to, that the policy refuses."""


@dataclass(frozen=True)
class WebhookPolicy:
    """LangGraph's `webhooks.url` rules, with Runyard's defaults."""

    allowed_domains: tuple[str, ...] = ()
    allowed_ports: tuple[int, ...] = ()
    require_https: bool = False
    disable_loopback: bool = True
    disable_private_ips: bool = True
    max_url_length: int = 4096

    def allows_domain(self, host: str) -> bool:
        """Whether `host` passes `allowed_domains` (everything does when it is empty)."""
        return not self.allowed_domains or self.listed(host)

    def listed(self, host: str) -> bool:
        """Whether `host` matches an entry of `allowed_domains` (`*.x` matches subdomains
        of x, not x itself). A listed host is trusted: its addresses are not checked."""
        for pattern in self.allowed_domains:
            p = pattern.strip().lower()
            if p.startswith("*.") and host.endswith(p[1:]):
                return True
            if host == p:
                return True
        return False


@dataclass(frozen=True)
class WebhookTarget:
    """A webhook URL that passed the policy's checks of its text."""

    url: str
    scheme: str
    host: str
    port: int
    # Listed in allowed_domains, or a literal address already checked: nothing to resolve.
    settled: bool
    address: IPAddress | None


def check_url(url: str, policy: WebhookPolicy) -> WebhookTarget:
    """Check everything about `url` that needs no name resolution; raise if refused."""
    if len(url) > policy.max_url_length:
        raise WebhookRefusedError(
            f"Webhook URL too long: {len(url)} characters, and webhooks.url.max_url_length "
            f"is {policy.max_url_length}; use a shorter URL"
        )
    if _UNSAFE_CHARS.search(url):
        raise WebhookRefusedError(
            "Invalid webhook URL: it contains a control character, a space or a backslash "
            "(CR/LF included); percent-encode it"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        explicit_port = parts.port
    except ValueError as exc:
        raise WebhookRefusedError(f"Invalid webhook URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise WebhookRefusedError(
            "Invalid webhook URL: it must be an absolute http:// or https:// URL"
        )
    if policy.require_https and scheme != "https":
        raise WebhookRefusedError(
            "Webhook must use https (webhooks.url.require_https is true in langgraph.json)"
        )
    port = explicit_port if explicit_port is not None else (443 if scheme == "https" else 80)
    if policy.allowed_ports and port not in policy.allowed_ports:
        allowed = ", ".join(str(p) for p in policy.allowed_ports)
        raise WebhookRefusedError(
            f"Webhook port {port} not allowed: webhooks.url.allowed_ports is [{allowed}]"
        )
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise WebhookRefusedError(
            f"Invalid webhook hostname '{host}': the URL needs a host, "
            "as in https://hooks.example.com/run-finished"
        )
    if not policy.allows_domain(host):
        raise WebhookRefusedError(
            f"Webhook domain not allowed: {host} is not in webhooks.url.allowed_domains"
        )
    if policy.listed(host):
        return WebhookTarget(url, scheme, host, port, settled=True, address=literal_address(host))
    _check_name(host, policy)
    address = literal_address(host)
    if address is not None:
        check_address(address, policy)
    return WebhookTarget(url, scheme, host, port, settled=address is not None, address=address)


def _check_name(host: str, policy: WebhookPolicy) -> None:
    if policy.disable_loopback and host in _LOCALHOST_NAMES:
        raise WebhookRefusedError(
            f"Webhook host blocked: localhost address ({host}); {LOOPBACK_HINT}"
        )
    if host in _METADATA_NAMES:
        raise WebhookRefusedError(
            f"Webhook host blocked: cloud metadata endpoint ({host}); {NEVER_HINT}"
        )
    if host.endswith(_K8S_SUFFIX):
        raise WebhookRefusedError(
            f"Webhook host blocked: Kubernetes internal DNS ({host}); {NEVER_HINT}"
        )


def literal_address(host: str) -> IPAddress | None:
    """The address `host` spells, in any form a resolver reads as one: dotted, decimal
    (2130706433), octal (0177.0.0.1), hex (0x7f000001), shortened (127.1), IPv6."""
    text = host.strip("[]")
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.split("%", 1)[0])
        except ValueError:
            return None
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        number = _c_integer(part)
        if number is None:
            return None
        numbers.append(number)
    # inet_aton: the last part fills the remaining bytes.
    head, last = numbers[:-1], numbers[-1]
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(value)


def _c_integer(part: str) -> int | None:
    lowered = part.lower()
    try:
        if lowered.startswith("0x"):
            return int(lowered[2:] or "0", 16)
        if len(lowered) > 1 and lowered.startswith("0"):
            return int(lowered[1:], 8)
        return int(lowered, 10) if lowered.isdigit() else None
    except ValueError:
        return None


def check_address(address: IPAddress | str, policy: WebhookPolicy) -> None:
    """Refuse an address the policy does not let the server call."""
    addr = ipaddress.ip_address(address) if isinstance(address, str) else address
    reason, hint = _blocked(_embedded_ipv4(addr) or addr, policy)
    if reason is None and isinstance(addr, ipaddress.IPv6Address):
        reason, hint = _blocked(addr, policy)
    if reason is not None:
        raise WebhookRefusedError(f"Webhook host blocked: {reason} ({addr}); {hint}")


def _embedded_ipv4(addr: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, translated, NAT64, 6to4), which is
    where it goes."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if _within(addr, _CARRIES_IPV4):
        return ipaddress.IPv4Address(addr.packed[-4:])
    return addr.sixtofour


def _blocked(addr: IPAddress, policy: WebhookPolicy) -> tuple[str | None, str]:
    if addr in _METADATA_IPS:
        return "cloud metadata endpoint", NEVER_HINT
    if _within(addr, _UNSPECIFIED):
        return "unspecified IP range", NEVER_HINT
    if _within(addr, _LINK_LOCAL):
        return "link-local IP range", NEVER_HINT
    if _within(addr, _LOOPBACK):
        return ("loopback IP range", LOOPBACK_HINT) if policy.disable_loopback else (None, "")
    if _within(addr, _RESERVED):
        return "blocked IP range", NEVER_HINT
    if _within(addr, _PRIVATE):
        return ("private IP range", PRIVATE_HINT) if policy.disable_private_ips else (None, "")
    return None, ""


def _within(
    addr: IPAddress, nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
) -> bool:
    return any(addr.version == net.version and addr in net for net in nets)
