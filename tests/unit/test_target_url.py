"""A webhook URL is refused when the job is written if a worker could never call it: httpx
would refuse it, or it names, as a literal address, one the worker's address guard refuses
(the guard's own rule and allow-list). Host names are left to the call-time check."""

from __future__ import annotations

from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.job.spec import JobSpec


def _doc(url: str) -> dict[str, Any]:
    return {"cron": "0 9 * * *", "tz": "UTC", "target": {"type": "http", "url": url}}


@pytest.fixture(autouse=True)
def _no_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOWLIST_ENV, raising=False)


@pytest.mark.parametrize("url", [
    "http://ex ample.com/",                     # httpx sends it to "ex%20ample.com"
    "http://a.b/\r\nX-Injected: 1",             # request splitting
    "http://a.b/\tx",
    "http://a.b/x\u2028y",
    "http://a.b/x\u00a0",
    "http://127.0.0.1:99999/",                  # port out of range
    "http://a.b:0/",
    "http://a.b:-1/",
    "http://a%20b.c/",                          # not a host name
    "http://a..b/",
    "http://300.1.1.1/",                        # a mistyped address
    "http://[::1x]/",
    "http://[::1%zone]\u3002]",                 # httpx keeps the host unencoded: not ASCII
    "http://a\u200cb.com/",                      # a joiner where IDNA allows none
    "http://a.com/\u200c",                       # and outside the host
    "http://a.com:8\u200c0/",
    "http://169.254.169.254/latest/meta-data/",  # link-local: the metadata service
    "http://127.0.0.1:8080/hook",               # loopback
    "http://10.1.2.3/",                         # private
    "http://100.64.0.1/",                       # CGNAT
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",               # IPv4-mapped loopback
    "http://2130706433/",                       # 127.0.0.1 as one number
    "http://0x7f.1/",                           # and in hex
    "http://0x7f000001/",                       # one hex number: the last label a number
    "http://0X7F000001/",
    "http://0xa9.0xfe.0xa9.0xfe/",              # link-local, each part in hex
    "http://127.0.0.0x1/",                      # only the last part in hex
    "http://0x0a000001/",                       # private
    "http://0x0a000001./",                      # with a final dot
    "http://a.0x/",                             # ends in a number that is none
    "http://0.0.0.0/",
])
def test_a_url_no_worker_could_call_is_refused_at_create(url: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        JobSpec.from_document(_doc(url))
    assert refused.value.field == "target.url"


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/emi",
    "https://HOOKS.example.com:8443/a%20b?x=1#frag",
    "http://пример.рф/",                        # IDNA
    "http://نامه\u200cای.com/",                  # IDNA with a zero-width non-joiner
    "http://\u0915\u094d\u200d\u0937.example/",     # and with a joiner, after a virama
    "http://gateway_1.internal./",              # container names, a final dot
    "http://localhost:8080/",                   # a name: checked when it is called
    "http://93.184.215.14/",                    # a public literal address
    "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/",
])
def test_urls_a_worker_can_call_are_accepted(url: str) -> None:
    assert JobSpec.from_document(_doc(url)).target["url"] == url


def test_the_allow_list_admits_a_literal_address_at_create_as_at_call_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://127.0.0.1:8080/hook"
    monkeypatch.setenv(ALLOWLIST_ENV, "127.0.0.1/32")
    assert JobSpec.from_document(_doc(url)).target["url"] == url
    monkeypatch.setenv(ALLOWLIST_ENV, "10.0.0.0/8")      # remembered verdicts follow it
    with pytest.raises(InvalidJob, match=ALLOWLIST_ENV):
        JobSpec.from_document(_doc(url))


def test_the_refusal_says_why() -> None:
    with pytest.raises(InvalidJob, match="link-local"):
        JobSpec.from_document(_doc("http://169.254.169.254/"))
    with pytest.raises(InvalidJob, match="from 1 to 65535, got 99999"):
        JobSpec.from_document(_doc("http://127.0.0.1:99999/"))
    with pytest.raises(InvalidJob, match="a space at position 9"):
        JobSpec.from_document(_doc("http://ex ample.com/"))


def test_the_character_check_refuses_exactly_the_refused_characters_at_their_position() -> None:
    from crondepot.job.url import _check_characters, _refused_char

    for code in [*range(0x3100), *range(0xFE00, 0x10000), 0xE0001, 0xE007F, 0x10FFFF]:
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        url = f"http://a.b/p\u00e9{char}"
        if _refused_char(char):
            with pytest.raises(InvalidJob, match=f"at position {len(url) - 1};"):
                _check_characters(url)
        else:
            _check_characters(url)


def test_the_schema_pattern_takes_an_idn_host_with_joiners_and_no_joiner_elsewhere() -> None:
    import re

    from crondepot.job.url import schema_pattern

    assert re.fullmatch(schema_pattern(), "http://نامه\u200cای.com/")
    assert not re.fullmatch(schema_pattern(), "http://a.com/\u200c")
