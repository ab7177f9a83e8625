"""Which secrets sign a webhook: the claimed one, or both during a rotation's overlap; the
snapshot of overlaps is read again when it is old or older than a claim with a secret this
process has not seen. Signatures checked with the Standard Webhooks reference library."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from crondepot.tenancy.webhook_secret import new_secret
from crondepot.worker.targets import sign_all
from crondepot.worker.webhook_keys import Overlap, SigningKeys, Snapshot

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
OLD, NEW = new_secret(), new_secret()


class Clock:
    def __init__(self) -> None:
        self.mono = 100.0
        self.wall = T0

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += timedelta(seconds=seconds)


class Database:
    """The snapshots a fetch returns: whatever the 'database' holds when it is asked."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.overlaps: dict[int, Overlap] = {}

    def fetch(self) -> Snapshot:
        return Snapshot(db_now=self.clock.wall, overlaps=dict(self.overlaps))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db(clock: Clock) -> Database:
    return Database(clock)


@pytest.fixture
def keys(db: Database, clock: Clock) -> SigningKeys:
    return SigningKeys(db.fetch, ttl_seconds=5, monotonic=lambda: clock.mono,
                       now=lambda: clock.wall)


def test_without_a_rotation_the_claimed_secret_signs_and_the_snapshot_is_reused(
        keys: SigningKeys, clock: Clock) -> None:
    assert keys.secrets_for(1, OLD, T0 - timedelta(seconds=1)) == (OLD,)
    for _ in range(100):
        clock.advance(0.01)
        assert keys.secrets_for(1, OLD, clock.wall) == (OLD,)
    assert keys.fetches == 1


def test_a_rotation_before_the_claim_is_seen_at_once(keys: SigningKeys, db: Database,
                                                     clock: Clock) -> None:
    assert keys.secrets_for(1, OLD, T0) == (OLD,)
    clock.advance(0.5)
    db.overlaps[1] = Overlap(current=NEW, previous=OLD, until=clock.wall + timedelta(hours=1))
    clock.advance(0.1)
    # The claim is newer than the snapshot and carries a secret not seen: read again.
    assert keys.secrets_for(1, NEW, clock.wall) == (NEW, OLD)
    assert keys.fetches == 2


def test_a_tenant_seen_first_after_the_snapshot_was_taken_reads_it_again(
        keys: SigningKeys, db: Database, clock: Clock) -> None:
    assert keys.secrets_for(1, OLD, T0) == (OLD,)
    clock.advance(0.5)
    db.overlaps[2] = Overlap(current=NEW, previous=OLD, until=clock.wall + timedelta(hours=1))
    assert keys.secrets_for(2, NEW, clock.wall) == (NEW, OLD)


def test_a_claim_older_than_the_snapshot_does_not_read_it_again(
        keys: SigningKeys, db: Database, clock: Clock) -> None:
    db.overlaps[1] = Overlap(current=NEW, previous=OLD, until=T0 + timedelta(hours=1))
    assert keys.secrets_for(1, NEW, T0 - timedelta(seconds=1)) == (NEW, OLD)
    # A run claimed before the rotation, with the old secret: the snapshot already knows.
    assert keys.secrets_for(1, OLD, T0 - timedelta(seconds=2)) == (NEW, OLD)
    assert keys.fetches == 1


def test_a_rotation_after_the_claim_is_seen_within_the_ttl(
        keys: SigningKeys, db: Database, clock: Clock) -> None:
    assert keys.secrets_for(1, OLD, T0) == (OLD,)
    clock.advance(1)
    db.overlaps[1] = Overlap(current=NEW, previous=OLD, until=clock.wall + timedelta(hours=1))
    # Claimed before the rotation, same secret as before: the snapshot is still fresh.
    assert keys.secrets_for(1, OLD, T0) == (OLD,)
    clock.advance(4)
    assert keys.secrets_for(1, OLD, T0) == (NEW, OLD)


def test_after_the_overlap_only_the_current_secret_signs(
        keys: SigningKeys, db: Database, clock: Clock) -> None:
    db.overlaps[1] = Overlap(current=NEW, previous=OLD, until=T0 + timedelta(seconds=3))
    assert keys.secrets_for(1, NEW, T0 - timedelta(seconds=1)) == (NEW, OLD)
    clock.advance(3)
    assert keys.secrets_for(1, NEW, T0) == (NEW,)
    # A run claimed before an overlap-0 rotation is not sent with the retired secret.
    assert keys.secrets_for(1, OLD, T0) == (NEW,)


def test_a_failed_read_leaves_no_snapshot_behind(clock: Clock) -> None:
    calls = []

    def fetch() -> Snapshot:
        calls.append(1)
        raise OSError("database away")

    keys = SigningKeys(fetch, monotonic=lambda: clock.mono, now=lambda: clock.wall)
    for _ in range(2):
        with pytest.raises(OSError):
            keys.secrets_for(1, OLD, T0)
    assert len(calls) == 2


def test_both_signatures_verify_with_the_reference_library_and_neither_alone_is_forged(
        ) -> None:
    body = b'{"run_id":"7:1791171000"}'
    timestamp = int(datetime.now(UTC).timestamp())
    header = sign_all((NEW, OLD), "7:1791171000", timestamp, body)
    assert len(header.split(" ")) == 2 and all(s.startswith("v1,") for s in header.split())
    headers = {"webhook-id": "7:1791171000", "webhook-timestamp": str(timestamp),
               "webhook-signature": header}
    for secret in (NEW, OLD):
        assert Webhook(secret).verify(body, headers) == {"run_id": "7:1791171000"}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(OLD).verify(body, {**headers, "webhook-signature": sign_all(
            (NEW,), "7:1791171000", timestamp, body)})
    with pytest.raises(ValueError, match="at least one"):
        sign_all((), "id", timestamp, body)
