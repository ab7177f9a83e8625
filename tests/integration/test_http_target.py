"""The webhook target against a real HTTP server on loopback, and the address guard.

Network rule for this file: traffic goes to loopback only. Refusals of other ranges are
tested with the pure ``AddressGuard.check`` or with a resolver that answers loopback
addresses that are not allow-listed, so even a broken guard could not reach anything else.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from crondepot.base.errors import PermanentError, TemporaryError
from crondepot.job.guard import ALLOWLIST_ENV, AddressGuard, TargetRefused
from crondepot.worker.targets import (
    OutcomeUnknown,
    WebhookCall,
    WebhookTarget,
    connection_limits,
    retry_after,
    verify,
    webhook_body,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"run_id":"r-1","payload":{"to":"+15550100"}}'
LOOPBACK_ONLY = AddressGuard(["127.0.0.1/32"])


from tests.support.target_server import Route, TargetServer  # noqa: E402


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer()
    yield srv
    srv.close()


@pytest.fixture
def target() -> Iterator[WebhookTarget]:
    with WebhookTarget(LOOPBACK_ONLY) as t:
        yield t


def _call(url: str, *, run_id: str = "r-1", timeout_s: float = 5.0, dedupes: bool = False,
          body: bytes = BODY) -> WebhookCall:
    return WebhookCall(url=url, run_id=run_id, body=body, signing_secret=SECRET,
                       timeout_s=timeout_s, dedupes=dedupes)


def _answers(*addresses: str) -> Resolving:
    return Resolving(list(addresses))


@dataclass
class Resolving:
    """A resolver seam: answers the given addresses and counts the questions."""

    answers: list[str]
    asked: list[str] = field(default_factory=list)

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        return list(self.answers)


# --- the request ------------------------------------------------------------------------


def test_call_posts_signed_json_with_the_run_id_as_idempotency_key(
        server: TargetServer, target: WebhookTarget) -> None:
    before = int(time.time())
    result = target.call(_call(server.url(), run_id="r-42"))

    assert result.status_code == 200
    [got] = server.received
    assert (got.method, got.path, got.body) == ("POST", "/hook", BODY)
    assert got.headers["content-type"] == "application/json"
    assert got.headers["idempotency-key"] == "r-42"
    assert got.headers["webhook-id"] == "r-42"
    assert got.headers["user-agent"] == "crondepot/0.1"
    assert got.headers["webhook-signature"].startswith("v1,")
    assert before <= int(got.headers["webhook-timestamp"]) <= int(time.time())
    verify(SECRET, got.headers, got.body)


def test_a_second_attempt_of_the_same_run_carries_the_same_key(
        server: TargetServer, target: WebhookTarget) -> None:
    target.call(_call(server.url(), run_id="r-7"))
    target.call(_call(server.url(), run_id="r-7"))
    target.call(_call(server.url(), run_id="r-8"))

    keys = [r.headers["idempotency-key"] for r in server.received]
    assert keys == ["r-7", "r-7", "r-8"]
    assert [r.headers["webhook-id"] for r in server.received] == keys


def test_the_user_agent_is_configurable(server: TargetServer) -> None:
    with WebhookTarget(LOOPBACK_ONLY, user_agent="acme-cron/2") as t:
        t.call(_call(server.url()))
    assert server.received[0].headers["user-agent"] == "acme-cron/2"


def test_webhook_body_is_compact_json_with_utc_instants() -> None:
    oslo = timezone(timedelta(hours=2))
    body = webhook_body(run_id="r-1", job_id=12, job_key=None,
                        scheduled_at=datetime(2026, 3, 29, 3, 0, tzinfo=oslo),
                        due_at=datetime(2026, 3, 29, 1, 0, 7, 250000, tzinfo=UTC),
                        attempt=2, payload={"to": "+4790000000", "text": "påminnelse"})

    assert b" " not in body.replace("påminnelse".encode(), b"")
    assert json.loads(body) == {
        "run_id": "r-1", "job_id": 12, "job_key": None,
        "scheduled_at": "2026-03-29T01:00:00Z", "due_at": "2026-03-29T01:00:07.250000Z",
        "attempt": 2, "payload": {"to": "+4790000000", "text": "påminnelse"},
    }
    assert list(json.loads(body)) == ["run_id", "job_id", "job_key", "scheduled_at",
                                      "due_at", "attempt", "payload"]


def test_webhook_body_refuses_a_naive_instant() -> None:
    with pytest.raises(ValueError, match="due_at: expected an aware datetime"):
        webhook_body(run_id="r", job_id=1, job_key="k", scheduled_at=datetime.now(UTC),
                     due_at=datetime(2026, 1, 1), attempt=1, payload={})


# --- classification ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 204])
def test_2xx_is_success(server: TargetServer, target: WebhookTarget, status: int) -> None:
    server.routes["/hook"] = Route(status=status, body=b"" if status == 204 else b"ok")
    result = target.call(_call(server.url()))
    assert result.status_code == status
    assert result.duration_s > 0


def test_a_large_2xx_body_is_still_success(server: TargetServer, target: WebhookTarget) -> None:
    server.routes["/hook"] = Route(body=b"x" * 1_000_000)
    assert target.call(_call(server.url())).status_code == 200


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_408_429_and_5xx_are_temporary(server: TargetServer, target: WebhookTarget,
                                       status: int) -> None:
    server.routes["/hook"] = Route(status=status, body=b"busy, come back later")
    with pytest.raises(TemporaryError) as caught:
        target.call(_call(server.url()))
    assert f"HTTP {status}" in str(caught.value)
    assert "busy, come back later" in str(caught.value)
    assert caught.value.retry_after_seconds is None


def test_retry_after_in_seconds_is_honoured(server: TargetServer, target: WebhookTarget) -> None:
    server.routes["/hook"] = Route(status=429, headers={"Retry-After": "7"})
    with pytest.raises(TemporaryError) as caught:
        target.call(_call(server.url()))
    assert caught.value.retry_after_seconds == 7


def test_retry_after_as_an_http_date_is_honoured(server: TargetServer) -> None:
    server.routes["/hook"] = Route(status=503,
                                   headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    date = datetime(2015, 10, 21, 7, 28, tzinfo=UTC).timestamp()
    with WebhookTarget(LOOPBACK_ONLY, clock=lambda: date - 90) as t, \
            pytest.raises(TemporaryError) as caught:
        t.call(_call(server.url()))
    assert caught.value.retry_after_seconds == 90


@pytest.mark.parametrize(("value", "expected"), [
    ("0", 0.0),
    ("86400", 3600.0),                              # capped
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),         # already past
    ("Wed, 21 Oct 2015 07:28:00 -0000", 0.0),
    ("soon", None),
    ("-5", None),
    ("", None),
])
def test_retry_after_parsing(value: str, expected: float | None) -> None:
    assert retry_after(value, now=time.time()) == expected


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_other_4xx_are_permanent_and_quote_the_body(server: TargetServer, target: WebhookTarget,
                                                    status: int) -> None:
    server.routes["/hook"] = Route(status=status, body=b"y" * 500)
    with pytest.raises(PermanentError) as caught:
        target.call(_call(server.url()))
    message = str(caught.value)
    assert f"HTTP {status}" in message
    assert "y" * 200 in message and "y" * 201 not in message


def test_a_redirect_is_not_followed_and_is_permanent(server: TargetServer,
                                                    target: WebhookTarget) -> None:
    server.routes["/hook"] = Route(status=302, headers={"Location": "/landing"})
    with pytest.raises(PermanentError, match=r"HTTP 302 .*redirect to /landing not followed"):
        target.call(_call(server.url()))
    assert server.paths() == ["/hook"]


def test_a_timeout_against_a_deduping_target_is_temporary(server: TargetServer,
                                                          target: WebhookTarget) -> None:
    server.routes["/slow"] = Route(delay_s=1.0)
    with pytest.raises(TemporaryError, match=r"no response .* within 0\.2 s") as caught:
        target.call(_call(server.url("/slow"), timeout_s=0.2, dedupes=True))
    assert not isinstance(caught.value, OutcomeUnknown)


def test_a_timeout_against_a_non_deduping_target_is_outcome_unknown(
        server: TargetServer, target: WebhookTarget) -> None:
    server.routes["/slow"] = Route(delay_s=1.0)
    with pytest.raises(OutcomeUnknown, match=r"^outcome unknown: no response") as caught:
        target.call(_call(server.url("/slow"), timeout_s=0.2, dedupes=False))
    assert isinstance(caught.value, PermanentError)
    assert server.paths() == ["/slow"]  # it did reach the target: that is the point


@pytest.mark.parametrize(("dedupes", "expected"), [(True, TemporaryError),
                                                   (False, OutcomeUnknown)])
def test_a_connection_dropped_after_sending_depends_on_dedupes(
        server: TargetServer, target: WebhookTarget, dedupes: bool,
        expected: type[Exception]) -> None:
    server.routes["/drop"] = Route(drop=True)
    with pytest.raises(expected, match="failed after the request was sent"):
        target.call(_call(server.url("/drop"), dedupes=dedupes))


def test_connection_refused_is_temporary(target: WebhookTarget) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TemporaryError, match="nothing was sent") as caught:
        target.call(_call(f"http://127.0.0.1:{port}/hook"))
    assert not isinstance(caught.value, OutcomeUnknown)


def test_a_name_that_does_not_resolve_is_temporary() -> None:
    def fails(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with WebhookTarget(LOOPBACK_ONLY, resolver=fails) as t, \
            pytest.raises(TemporaryError, match=r"cannot resolve nowhere\.test"):
        t.call(_call("http://nowhere.test/hook"))


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/hook", "file:///etc/passwd",
                                 "127.0.0.1:8080/hook", "http://", "mailto:ops@example.com"])
def test_only_http_and_https_urls_are_called(target: WebhookTarget, url: str) -> None:
    with pytest.raises(PermanentError, match="expected an http:// or https:// URL"):
        target.call(_call(url))


def test_a_bad_signing_secret_is_permanent(server: TargetServer, target: WebhookTarget) -> None:
    call = WebhookCall(url=server.url(), run_id="r-1", body=BODY, signing_secret="whsec_???",
                       timeout_s=5.0, dedupes=False)
    with pytest.raises(PermanentError, match="signing secret"):
        target.call(call)
    assert server.received == []


def test_messages_leave_out_credentials_and_query(server: TargetServer,
                                                  target: WebhookTarget) -> None:
    server.routes["/hook?token=s3cret"] = Route(status=404)
    url = f"http://user:hunter2@127.0.0.1:{server.port}/hook?token=s3cret"
    with pytest.raises(PermanentError) as caught:
        target.call(_call(url))
    assert "hunter2" not in str(caught.value) and "s3cret" not in str(caught.value)


def test_connections_are_pooled(server: TargetServer, target: WebhookTarget) -> None:
    for _ in range(3):
        target.call(_call(server.url()))
    assert len({r.client_port for r in server.received}) == 1


def test_calls_from_many_threads_share_one_target(server: TargetServer,
                                                 target: WebhookTarget) -> None:
    runs = [f"r-{i}" for i in range(40)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda run: target.call(_call(server.url(), run_id=run)), runs))
    assert all(r.status_code == 200 for r in results)
    assert sorted(r.headers["idempotency-key"] for r in server.received) == sorted(runs)


def test_the_pool_never_trims_connections_and_has_room_for_every_slot() -> None:
    limits = connection_limits(40)
    assert limits.max_keepalive_connections == limits.max_connections
    assert limits.max_connections is not None and limits.max_connections >= 40


def test_many_slots_calling_many_hosts_never_lose_a_connection_mid_call() -> None:
    """Regression (chaos run 2): httpcore's sync pool closed a connection it had just handed
    to another thread's request when it trimmed idle connections above its keep-alive limit
    (20, below 2 gateways x 15 slots), and that call failed after sending with "[Errno 9] Bad
    file descriptor": an OutcomeUnknown. With the old limits this load (40 threads, 4 hosts,
    6,000 calls) failed 1-3 calls in a third to two thirds of runs; none may fail."""
    servers = [TargetServer() for _ in range(4)]
    threads, calls = 40, 150
    try:
        with WebhookTarget(LOOPBACK_ONLY, slots=threads) as target:
            def slot(i: int) -> list[str]:
                failed = []
                for k in range(calls):
                    url = servers[(i + k) % len(servers)].url()
                    try:
                        target.call(_call(url, run_id=f"r-{i}-{k}"))
                    except (TemporaryError, PermanentError) as exc:
                        failed.append(str(exc))
                return failed

            with ThreadPoolExecutor(max_workers=threads) as pool:
                failures = [f for found in pool.map(slot, range(threads)) for f in found]
    finally:
        for srv in servers:
            srv.close()
    assert failures == []
    assert sum(len(srv.received) for srv in servers) == threads * calls


# --- the address guard: pure checks (never any traffic) ----------------------------------


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "in the CGNAT shared range 100.64.0.0/10"),
    ("100.127.255.254", "in the CGNAT shared range 100.64.0.0/10"),
    ("0.0.0.0", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.2.1", "private"),                      # documentation range
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fc00::1", "private"),
    ("fd00:ec2::254", "private"),                  # a cloud metadata address over IPv6
    ("ff02::1", "multicast"),
    ("fec0::1", "site-local"),
    ("::ffff:127.0.0.1", "loopback (IPv4-mapped 127.0.0.1)"),
    ("::ffff:10.1.2.3", "private (IPv4-mapped 10.1.2.3)"),
    ("::ffff:169.254.169.254", "link-local (IPv4-mapped 169.254.169.254)"),
    ("2002:7f00:1::", "loopback (6to4 127.0.0.1)"),
    ("64:ff9b::a01:203", "private (NAT64 10.1.2.3)"),
    ("2001::1", "private"),                        # Teredo
])
def test_the_default_guard_refuses_non_public_addresses(address: str, reason: str) -> None:
    expected = re.escape(f"target address {address} (h.example) is {reason}; ")
    with pytest.raises(TargetRefused, match=expected) as caught:
        AddressGuard().check("h.example", address)
    assert caught.value.address == address and caught.value.host == "h.example"


def test_a_refusal_names_the_address_the_host_and_the_way_out() -> None:
    with pytest.raises(TargetRefused) as caught:
        AddressGuard().check("localhost", "127.0.0.1")
    assert str(caught.value) == ("target address 127.0.0.1 (localhost) is loopback; "
                                 "allow it with CRONDEPOT_TARGET_ALLOWLIST")
    assert isinstance(caught.value, PermanentError)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8",
                                     "2606:2800:220:1:248:1893:25c8:1946",
                                     "::ffff:93.184.216.34", "64:ff9b::5db8:d822"])
def test_the_default_guard_passes_public_addresses(address: str) -> None:
    AddressGuard().check("example.com", address)


def test_an_allowed_cidr_admits_its_addresses_and_their_ipv4_mapped_forms() -> None:
    guard = AddressGuard(["10.0.0.0/8", "fd00::/8"])
    for address in ["10.1.2.3", "::ffff:10.1.2.3", "fd12::1"]:
        guard.check("gateway", address)
    with pytest.raises(TargetRefused):
        guard.check("gateway", "192.168.1.1")


def test_an_allowed_host_name_admits_whatever_it_resolves_to() -> None:
    guard = AddressGuard(["Gateway.Internal."])
    guard.check("gateway.internal", "10.1.2.3")
    guard.check("GATEWAY.internal.", "169.254.169.254")
    with pytest.raises(TargetRefused):
        guard.check("other.internal", "10.1.2.3")


def test_an_address_that_is_not_one_is_refused() -> None:
    with pytest.raises(TargetRefused, match="is not an IP address"):
        AddressGuard().check("h", "localhost")


# --- the address guard: allow-list parsing ----------------------------------------------


def test_the_allow_list_is_read_from_the_environment() -> None:
    guard = AddressGuard.from_env({ALLOWLIST_ENV: " 10.0.0.0/8, ::1/128 ,localhost,, 192.168.0.7,"})
    for host, address in [("a", "10.9.9.9"), ("a", "::1"), ("localhost", "127.0.0.1"),
                          ("a", "192.168.0.7")]:
        guard.check(host, address)
    with pytest.raises(TargetRefused):
        guard.check("a", "192.168.0.8")


def test_an_unset_allow_list_refuses_by_default() -> None:
    with pytest.raises(TargetRefused):
        AddressGuard.from_env({}).check("a", "10.0.0.1")


@pytest.mark.parametrize(("entry", "message"), [
    ("10.0.0.1/8", r"'10.0.0.1/8' is not a valid CIDR: .*host bits set .*did you mean 10.0.0.0/8"),
    ("10.0.0.0/33", r"'10.0.0.0/33' is not a valid CIDR"),
    ("300.1.1.1", r"'300.1.1.1' is not a valid CIDR"),
    ("*.internal", r"'\*.internal' is neither a CIDR .* nor a host name"),
    ("http://gateway", r"'http://gateway' is not a valid CIDR"),
    ("-bad-.internal", r"'-bad-.internal' is neither a CIDR"),
])
def test_a_bad_allow_list_entry_is_named(entry: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{ALLOWLIST_ENV}: allow-list entry {message}"):
        AddressGuard.from_env({ALLOWLIST_ENV: f"10.0.0.0/8,{entry}"})


def test_the_allow_list_must_be_a_sequence_of_entries() -> None:
    with pytest.raises(TypeError, match="expected a sequence of entries"):
        AddressGuard("10.0.0.0/8")


# --- the address guard on real calls (loopback only) ------------------------------------


@pytest.mark.parametrize(("host", "address"), [("127.0.0.1", "127.0.0.1"),
                                               ("localhost", "127.0.0.1")])
def test_a_call_to_loopback_is_refused_before_connecting(server: TargetServer, host: str,
                                                         address: str) -> None:
    with WebhookTarget(AddressGuard()) as t, pytest.raises(TargetRefused) as caught:
        t.call(_call(server.url(host=host)))
    if host == address:    # the tenant wrote the address: said back as it is
        assert str(caught.value).startswith(f"target address {address} ({host}) is loopback")
    else:                  # a name: what it resolved to stays in the operator's log
        assert address not in str(caught.value) and "loopback" not in str(caught.value)
    assert server.received == []


def test_a_call_to_ipv6_loopback_is_refused(server: TargetServer) -> None:
    with WebhookTarget(AddressGuard()) as t, pytest.raises(TargetRefused, match="::1"):
        t.call(_call(f"http://[::1]:{server.port}/hook"))


def test_the_guard_comes_from_the_environment_by_default(
        server: TargetServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, "127.0.0.1/32")
    with WebhookTarget() as t:
        assert t.call(_call(server.url())).status_code == 200
    monkeypatch.delenv(ALLOWLIST_ENV)
    with WebhookTarget() as t, pytest.raises(TargetRefused):
        t.call(_call(server.url()))


def test_a_name_resolving_to_loopback_is_refused(server: TargetServer) -> None:
    resolver = _answers("127.0.0.1")
    with WebhookTarget(AddressGuard(), resolver=resolver) as t, \
            pytest.raises(TargetRefused) as caught:
        t.call(_call(server.url(host="rebind.test")))
    assert resolver.asked == ["rebind.test"]
    assert server.received == []
    assert caught.value.address == "127.0.0.1"
    # what the run records says neither the address the name resolved to nor its kind
    assert str(caught.value) == ("target host rebind.test resolves to an address webhooks "
                                 "may not call; the operator can allow it with "
                                 "CRONDEPOT_TARGET_ALLOWLIST")


def test_the_operator_log_keeps_the_address_a_refused_name_resolved_to(
        server: TargetServer, caplog: pytest.LogCaptureFixture) -> None:
    with WebhookTarget(AddressGuard(), resolver=_answers("10.1.2.3")) as t, \
            caplog.at_level("WARNING", logger="crondepot.worker"), \
            pytest.raises(TargetRefused, match=r"rebind\.test resolves to an address"):
        t.call(_call(server.url(host="rebind.test")))
    assert "target address 10.1.2.3 (rebind.test) is private" in caplog.text


@pytest.mark.parametrize("allow", ["127.0.0.1/32", "rebind.test"])
def test_a_name_resolving_to_loopback_is_called_when_allowed(server: TargetServer,
                                                             allow: str) -> None:
    with WebhookTarget(AddressGuard([allow]), resolver=_answers("127.0.0.1")) as t:
        assert t.call(_call(server.url(host="rebind.test"))).status_code == 200
    assert server.received[0].headers["host"] == f"rebind.test:{server.port}"


def test_each_connection_is_judged_on_the_address_it_goes_to(server: TargetServer) -> None:
    # "Connection: close" forces a new connection per call, as a rebinding attacker would
    # wait for; the second answer is a loopback address that is not allow-listed.
    server.routes["/hook"] = Route(headers={"Connection": "close"})
    resolver = _answers("127.0.0.1")
    with WebhookTarget(LOOPBACK_ONLY, resolver=resolver) as t:
        t.call(_call(server.url(host="rebind.test")))
        assert resolver.asked == ["rebind.test"]  # one resolution per connection, no second
        resolver.answers = ["127.0.0.2"]
        with pytest.raises(TargetRefused) as caught:
            t.call(_call(server.url(host="rebind.test")))
        assert caught.value.address == "127.0.0.2"
    assert len(server.received) == 1


def test_only_allowed_answers_are_connected_to(server: TargetServer) -> None:
    with WebhookTarget(LOOPBACK_ONLY, resolver=_answers("127.0.0.2", "127.0.0.1")) as t:
        assert t.call(_call(server.url(host="rebind.test"))).status_code == 200


# --- TLS: the socket goes to a number, the certificate is checked against the name -------


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=crondepot test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
        "-subj", "/CN=rebind.test")
    (d / "ext.cnf").write_text("subjectAltName=DNS:rebind.test\n")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "ext.cnf")
    return Pki(ca=d / "ca.pem", cert=d / "leaf.pem", key=d / "leaf.key")


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[TargetServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert, pki.key)
    srv = TargetServer(context)
    yield srv
    srv.close()


@pytest.mark.parametrize(("host", "succeeds"), [("rebind.test", True), ("other.test", False)])
def test_tls_verifies_the_certificate_against_the_host_name(
        tls_server: TargetServer, pki: Pki, host: str, succeeds: bool) -> None:
    trusting = ssl.create_default_context(cafile=str(pki.ca))
    with WebhookTarget(LOOPBACK_ONLY, resolver=_answers("127.0.0.1"),
                       ssl_context=trusting) as t:
        if succeeds:
            assert t.call(_call(tls_server.url(host=host))).status_code == 200
        else:
            with pytest.raises(TemporaryError, match="nothing was sent"):
                t.call(_call(tls_server.url(host=host)))
    assert len(tls_server.received) == (1 if succeeds else 0)
