"""The pure parts of failure notices: the SMTP relay's URL, the retry curve, what a notice
and a digest say, and the maintenance options that hand the sender to the leader."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from crondepot.cli import build_parser
from crondepot.cli.prune import maintenance_config
from crondepot.maintenance.maintainer import services
from crondepot.notices import message
from crondepot.notices.outbox import RETRY_BASE_SECONDS, RETRY_CAP_SECONDS, Claimed, retry_delay
from crondepot.notices.sender import NoticeSender, SmtpRelay

AT = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def _claimed(*, digest: bool = False, events: int = 1) -> Claimed:
    told = [{"kind": "run_dead", "run_id": f"42:{1_791_171_000 + i}",
             "detail": f"run 42:{1_791_171_000 + i} dead-lettered after 6 attempt(s): HTTP 503",
             "occurred_at": "2026-12-06T09:00:00+00:00"} for i in range(events)]
    return Claimed(id=7, tenant_id=1, tenant="bank42", signing_secret="whsec_x", kind="email",
                   address="ops@bank42.example", job_id=42, job_key="emi-42", digest=digest,
                   events=told, attempts=1, created_at=AT, db_now=AT)


@pytest.mark.parametrize(("url", "want"), [
    ("smtp://relay.internal", ("relay.internal", 25, "plain", None, "crondepot@localhost")),
    ("smtp+starttls://bot:p%40ss@mail.example?from=alerts@bank.example",
     ("mail.example", 587, "starttls", "bot", "alerts@bank.example")),
    ("smtps://mail.example:2465", ("mail.example", 2465, "tls", None, "crondepot@localhost")),
])
def test_the_relay_is_read_from_its_url(url: str, want: tuple[object, ...]) -> None:
    relay = SmtpRelay.from_url(url)
    assert (relay.host, relay.port, relay.security, relay.username, relay.sender) == want
    assert "p@ss" not in relay.describe()
    if relay.username:
        assert relay.password == "p@ss"
    assert SmtpRelay.from_url(url, sender="x@y.example").sender == "x@y.example"


@pytest.mark.parametrize(("url", "words"), [
    ("http://mail.example", "expected smtp://"), ("smtp://", "no host"),
    ("smtp://mail.example:99999", "port"),
])
def test_a_bad_relay_url_says_what_is_wrong(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        SmtpRelay.from_url(url)


def test_retries_back_off_with_full_jitter_up_to_the_cap() -> None:
    assert retry_delay(1, 0.999) == pytest.approx(RETRY_BASE_SECONDS * 0.999)
    assert retry_delay(3, 0.5) == pytest.approx(RETRY_BASE_SECONDS * 2)
    assert retry_delay(40, 0.5) == pytest.approx(RETRY_CAP_SECONDS / 2)
    assert retry_delay(1, 0.0) == 1.0                          # never at once


def test_a_notice_and_a_digest_say_what_happened() -> None:
    one = _claimed()
    assert message.subject(one) == "crondepot: job 42 (emi-42) dead-lettered a run"
    mail = message.email(one, sender="n@crondepot.test", recipient="ops@bank42.example")
    assert mail["To"] == "ops@bank42.example" and mail["X-Crondepot-Notice"] == "notice-7"
    assert "42:1791171000" in mail.get_content()
    digest = _claimed(digest=True, events=3)
    assert message.subject(digest) == "crondepot digest: job 42 (emi-42), 3 events"
    assert "folded into this digest" in message.text(digest)
    body = message.document(digest)
    assert body["type"] == "digest" and body["id"] == "notice-7" and len(body["events"]) == 3
    assert body["created_at"] == "2026-12-06T09:00:00Z"


def test_the_options_hand_the_sender_to_the_maintenance_leader() -> None:
    args = build_parser("worker").parse_args(
        ["worker", "--smtp-url", "smtp://relay.internal:2525", "--smtp-from",
         "n@bank.example", "--notice-window", "30m"])
    config = maintenance_config(args, "postgresql://x/y", "w")
    assert isinstance(config.notices, NoticeSender)
    assert config.notices.smtp is not None and config.notices.smtp.port == 2525
    assert config.notices.smtp.sender == "n@bank.example"
    assert config.notices.window_seconds == 1800
    assert "notices" in [s.name for s in services(config)]
    off = build_parser("worker").parse_args(["worker", "--notice-every", "0"])
    config = maintenance_config(off, "postgresql://x/y", "w")
    assert config.notices is None and "notices" not in [s.name for s in services(config)]


def test_a_bad_smtp_url_stops_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser("scheduler").parse_args(["scheduler", "--smtp-url", "mail.example"])
    assert stopped.value.code == 2
    assert "expected smtp://" in capsys.readouterr().err
