"""Standard Webhooks signing: the published test vector, round trips and every refusal."""

from __future__ import annotations

import pytest

from crondepot.worker.targets import sign, verify

# The vector from the Standard Webhooks reference libraries' tests.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def _headers(signature: str = SIGNATURE, timestamp: int = TIMESTAMP) -> dict[str, str]:
    return {"webhook-id": MSG_ID, "webhook-timestamp": str(timestamp),
            "webhook-signature": signature}


def test_sign_matches_the_standard_webhooks_vector() -> None:
    assert sign(SECRET, MSG_ID, TIMESTAMP, BODY) == SIGNATURE


def test_sign_accepts_a_secret_without_the_prefix() -> None:
    assert sign(SECRET.removeprefix("whsec_"), MSG_ID, TIMESTAMP, BODY) == SIGNATURE


def test_verify_accepts_the_vector_within_tolerance() -> None:
    verify(SECRET, _headers(), BODY, now=TIMESTAMP + 299)
    verify(SECRET, _headers(), BODY, now=TIMESTAMP - 299)


def test_verify_matches_header_names_case_insensitively() -> None:
    headers = {name.title(): value for name, value in _headers().items()}
    verify(SECRET, headers, BODY, now=TIMESTAMP)


def test_verify_accepts_any_one_of_several_signatures() -> None:
    rotated = f"v1,bm90IHRoaXMgb25l {SIGNATURE} v1a,whatever"
    verify(SECRET, _headers(rotated), BODY, now=TIMESTAMP)


def test_verify_rejects_a_changed_body() -> None:
    with pytest.raises(ValueError, match="no v1 signature matches"):
        verify(SECRET, _headers(), BODY + b" ", now=TIMESTAMP)


def test_verify_rejects_another_secret() -> None:
    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
    with pytest.raises(ValueError, match="no v1 signature matches"):
        verify(other, _headers(), BODY, now=TIMESTAMP)


def test_verify_rejects_a_changed_timestamp() -> None:
    # The timestamp is inside the signed text, so moving it breaks the signature.
    with pytest.raises(ValueError, match="no v1 signature matches"):
        verify(SECRET, _headers(timestamp=TIMESTAMP + 1), BODY, now=TIMESTAMP)


def test_verify_rejects_a_signature_without_the_version() -> None:
    with pytest.raises(ValueError, match="no v1 signature matches"):
        verify(SECRET, _headers(SIGNATURE.removeprefix("v1,")), BODY, now=TIMESTAMP)


def test_verify_rejects_a_stale_timestamp() -> None:
    with pytest.raises(ValueError, match=r"301 s old, more than the tolerance of 300 s"):
        verify(SECRET, _headers(), BODY, now=TIMESTAMP + 301)


def test_verify_rejects_a_timestamp_from_the_future() -> None:
    with pytest.raises(ValueError, match=r"in the future"):
        verify(SECRET, _headers(), BODY, now=TIMESTAMP - 301)


def test_verify_honours_a_custom_tolerance() -> None:
    with pytest.raises(ValueError, match="tolerance of 10 s"):
        verify(SECRET, _headers(), BODY, tolerance_s=10, now=TIMESTAMP + 11)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_verify_names_a_missing_header(missing: str) -> None:
    headers = _headers()
    del headers[missing]
    with pytest.raises(ValueError, match=f"{missing}: header missing"):
        verify(SECRET, headers, BODY, now=TIMESTAMP)


def test_verify_rejects_a_timestamp_that_is_not_a_number() -> None:
    headers = {**_headers(), "webhook-timestamp": "yesterday"}
    with pytest.raises(ValueError, match="expected unix seconds, got 'yesterday'"):
        verify(SECRET, headers, BODY, now=TIMESTAMP)


def test_verify_tolerates_a_non_ascii_signature_header() -> None:
    with pytest.raises(ValueError, match="no v1 signature matches"):
        verify(SECRET, _headers("v1,ünïcode"), BODY, now=TIMESTAMP)


@pytest.mark.parametrize("secret", ["whsec_not base64!", "whsec_"])
def test_sign_rejects_a_secret_that_is_not_a_key(secret: str) -> None:
    with pytest.raises(ValueError, match="signing secret: expected 'whsec_'"):
        sign(secret, MSG_ID, TIMESTAMP, BODY)
