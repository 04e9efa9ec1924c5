"""The webhook URL policy: LangGraph's `webhooks.url` rules (compared against langgraph-api
0.16.7, `langgraph_api/webhook.py` and `lc_security/policy.py`: the same rules and message
openings) and Runyard's safe defaults, on every spelling of an internal address."""

from __future__ import annotations

import pytest

from runyard.domain.errors import ConfigError
from runyard.domain.webhook_policy import (
    WebhookPolicy,
    WebhookRefusedError,
    check_address,
    check_url,
    literal_address,
)
from runyard.project.webhooks_config import parse_webhooks

DEFAULT = WebhookPolicy()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:6379/", "loopback IP range"),
        ("http://127.9.9.9/", "loopback IP range"),
        ("http://2130706433/", "loopback IP range"),
        ("http://0177.0.0.1/", "loopback IP range"),
        ("http://0x7f000001/", "loopback IP range"),
        ("http://0x7f.0.0.1/", "loopback IP range"),
        ("http://127.1/", "loopback IP range"),
        ("http://[::1]:5432/", "loopback IP range"),
        ("http://[::ffff:127.0.0.1]/", "loopback IP range"),
        ("http://[::ffff:7f00:1]/", "loopback IP range"),
        ("http://[64:ff9b::7f00:1]/", "loopback IP range"),
        # IPv4-translated (::ffff:0:0:0/96), where ::ffff:0:7f00:1 is 127.0.0.1.
        ("http://[::ffff:0:7f00:1]/", "loopback IP range"),
        ("http://[::ffff:0:127.0.0.1]/", "loopback IP range"),
        ("http://[::ffff:0:a00:5]/", "private IP range"),
        ("http://[::ffff:0:a9fe:a9fe]/", "cloud metadata endpoint"),
        ("http://[::ffff:0:0:0]/", "unspecified IP range"),
        # NAT64: the well-known prefix; the local-use /48 is never a receiver, whatever IPv4
        # address it carries (here 127.0.0.1, then a public one).
        ("http://[64:ff9b::a00:5]/", "private IP range"),
        ("http://[64:ff9b::a9fe:a9fe]/", "cloud metadata endpoint"),
        ("http://[64:ff9b:1:7f00:0:100::]/", "blocked IP range"),
        ("http://[64:ff9b:1:5db8:d8:2200::]/", "blocked IP range"),
        ("http://localhost:8123/threads", "localhost address"),
        ("http://LOCALHOST./", "localhost address"),
        ("http://0.0.0.0/", "unspecified IP range"),
        ("http://0/", "unspecified IP range"),
        ("http://[::]/", "unspecified IP range"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata endpoint"),
        ("http://169.254.1.1/", "link-local IP range"),
        ("http://[fe80::1]/", "link-local IP range"),
        ("http://[::ffff:169.254.169.254]/", "cloud metadata endpoint"),
        ("http://metadata.google.internal/", "cloud metadata endpoint"),
        ("http://10.0.0.5/", "private IP range"),
        ("http://012.0.0.5/", "private IP range"),
        ("http://172.16.3.4/", "private IP range"),
        ("http://192.168.1.1/", "private IP range"),
        ("http://3232235777/", "private IP range"),
        ("http://100.64.0.1/", "private IP range"),
        ("http://[fd12::1]/", "private IP range"),
        ("http://[::ffff:10.0.0.1]/", "private IP range"),
        ("http://224.0.0.1/", "blocked IP range"),
        ("http://redis.default.svc.cluster.local/", "Kubernetes internal DNS"),
    ],
)
def test_internal_addresses_are_refused_by_default(url: str, reason: str) -> None:
    with pytest.raises(WebhookRefusedError) as caught:
        check_url(url, DEFAULT)
    assert caught.value.status_code == 422
    assert caught.value.message.startswith(f"Webhook host blocked: {reason}")


def test_the_message_names_the_rule_that_allows_it() -> None:
    with pytest.raises(WebhookRefusedError, match=r"webhooks\.url\.disable_loopback"):
        check_url("http://127.0.0.1/", DEFAULT)
    with pytest.raises(WebhookRefusedError, match=r"webhooks\.url\.disable_private_ips"):
        check_url("http://10.1.2.3/", DEFAULT)


def test_loopback_and_private_are_allowed_when_the_policy_says() -> None:
    open_policy = WebhookPolicy(disable_loopback=False, disable_private_ips=False)
    for url in ("http://127.0.0.1:9/", "http://localhost/", "http://[::1]/", "http://10.0.0.1/"):
        check_url(url, open_policy)
    # Never a receiver, whatever the policy.
    for url in ("http://0.0.0.0/", "http://169.254.169.254/", "http://[fe80::1]/"):
        with pytest.raises(WebhookRefusedError):
            check_url(url, open_policy)


@pytest.mark.parametrize(
    ("url", "opening"),
    [
        ("http://127.0.0.1:9340/a\r\nX-Injected: 1", "Invalid webhook URL"),
        ("http://hooks.example.com/a\nb", "Invalid webhook URL"),
        ("http://hooks.example.com/a b", "Invalid webhook URL"),
        ("http:///nohost", "Invalid webhook hostname"),
        ("http://:80/", "Invalid webhook hostname"),
        ("http://hooks.example.com:99999/", "Invalid webhook URL"),
        ("ftp://hooks.example.com/", "Invalid webhook URL"),
        ("/relative/hook", "Invalid webhook URL"),
        ("http://hooks.example.com/" + "a" * 5000, "Webhook URL too long"),
    ],
)
def test_malformed_urls_are_refused(url: str, opening: str) -> None:
    with pytest.raises(WebhookRefusedError) as caught:
        check_url(url, DEFAULT)
    assert caught.value.message.startswith(opening)


def test_public_addresses_pass_and_names_are_left_to_resolution() -> None:
    target = check_url("https://93.184.216.34/hook", DEFAULT)
    assert target.settled and str(target.address) == "93.184.216.34"
    target = check_url("https://hooks.example.com/hook", DEFAULT)
    assert not target.settled and target.port == 443


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("::ffff:0:7f00:1", "loopback IP range"),
        ("::ffff:0:c0a8:101", "private IP range"),
        ("64:ff9b::7f00:1", "loopback IP range"),
        ("64:ff9b:1:a9fe:a9:fe00::", "blocked IP range"),
    ],
)
def test_a_resolved_ipv6_form_of_a_blocked_address_is_refused(address: str, reason: str) -> None:
    """What a name resolves to goes through the same check (a AAAA record can carry it)."""
    with pytest.raises(WebhookRefusedError, match=f"Webhook host blocked: {reason}"):
        check_address(address, DEFAULT)


def test_ipv6_forms_of_a_public_address_pass() -> None:
    for address in ("::ffff:0:5db8:d822", "64:ff9b::5db8:d822", "::ffff:93.184.216.34"):
        check_address(address, DEFAULT)


def test_literal_spellings_read_as_a_resolver_reads_them() -> None:
    assert str(literal_address("2130706433")) == "127.0.0.1"
    assert str(literal_address("0177.0.0.01")) == "127.0.0.1"
    assert str(literal_address("0x7f.1")) == "127.0.0.1"
    assert str(literal_address("10.1")) == "10.0.0.1"
    assert literal_address("hooks.example.com") is None
    assert literal_address("256.0.0.1") is None
    assert literal_address("08.0.0.1") is None


def test_langgraph_url_rules() -> None:
    """`allowed_domains` (`*.` matches subdomains, not the apex), `allowed_ports`,
    `require_https` and `max_url_length`, with the official server's message openings."""
    config = parse_webhooks(
        "langgraph.json",
        {
            "url": {
                "allowed_domains": ["hooks.example.com", "*.mycorp.com"],
                "allowed_ports": [443, 8443],
                "max_url_length": 60,
            }
        },
    )
    policy = config.policy(dev=False)
    assert policy.require_https  # a `url` section makes https the default, as there
    check_url("https://hooks.example.com/x", policy)
    check_url("https://a.b.mycorp.com:8443/x", policy)
    refusals = {
        "http://hooks.example.com/x": "Webhook must use https",
        "https://hooks.example.com:444/x": "Webhook port 444 not allowed",
        "https://mycorp.com/x": "Webhook domain not allowed",
        "https://evil.com/x": "Webhook domain not allowed",
        "https://hooks.example.com.evil.com/x": "Webhook domain not allowed",
        "https://hooks.example.com/" + "x" * 60: "Webhook URL too long",
    }
    for url, opening in refusals.items():
        with pytest.raises(WebhookRefusedError) as caught:
            check_url(url, policy)
        assert caught.value.message.startswith(opening), url


def test_a_listed_host_is_trusted_as_on_the_official_server() -> None:
    policy = WebhookPolicy(allowed_domains=("127.0.0.1", "*.internal.example"))
    assert check_url("http://127.0.0.1:9/", policy).settled
    assert check_url("http://a.internal.example/", policy).settled


def test_defaults_of_each_mode() -> None:
    none = parse_webhooks("langgraph.json", None)
    assert none.policy(dev=False) == WebhookPolicy()
    dev = none.policy(dev=True)
    assert not dev.disable_loopback and dev.disable_private_ips and not dev.require_https
    written = parse_webhooks("langgraph.json", {"url": {"disable_loopback": True}})
    assert written.loopback_written and written.policy(dev=True).disable_loopback


LISTED = {"allowed_domains": ["hooks.example.com"]}


def test_headers_are_templated_from_the_environment_under_the_prefix() -> None:
    env = {"LG_WEBHOOK_TOKEN": "s3cret", "MY_TEAM": "blue"}
    config = parse_webhooks(
        "langgraph.json",
        {
            "url": LISTED,
            "headers": {"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "X-Plain": "v"},
        },
        env,
    )
    assert config.headers == {"Authorization": "Bearer s3cret", "X-Plain": "v"}
    custom = parse_webhooks(
        "langgraph.json",
        {"url": LISTED, "env_prefix": "MY_", "headers": {"X-Team": "${{env.MY_TEAM}}"}},
        env,
    )
    assert custom.headers == {"X-Team": "blue"}
    for headers, problem in [
        ({"X": "${{ env.HOME }}"}, "env_prefix"),
        ({"X": "${{ env.LG_WEBHOOK_MISSING }}"}, "not set"),
        ({"X": "${{ secrets.LG_WEBHOOK_TOKEN }}"}, "env.VAR"),
    ]:
        with pytest.raises(ConfigError, match=problem):
            parse_webhooks("langgraph.json", {"url": LISTED, "headers": headers}, env)


@pytest.mark.parametrize(
    "url", [None, {}, {"allowed_domains": []}, {"require_https": True}], ids=str
)
def test_headers_without_allowed_domains_are_refused_at_start(url: object) -> None:
    """Any user who creates a run picks its webhook URL: a header (a token, say) configured
    for every delivery would go wherever they point it."""
    raw: dict[str, object] = {"headers": {"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}"}}
    if url is not None:
        raw["url"] = url
    with pytest.raises(ConfigError) as refused:
        parse_webhooks("langgraph.json", raw, {"LG_WEBHOOK_TOKEN": "s3cret"})
    message = refused.value.message
    assert "webhooks.headers" in message and "webhooks.url.allowed_domains" in message
    assert "any URL" in message
    assert "s3cret" not in message
    # No headers: nothing to leak, nothing to refuse.
    assert parse_webhooks("langgraph.json", {"headers": {}}).headers == {}
