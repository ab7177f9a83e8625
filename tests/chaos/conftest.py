"""The chaos bench's jobs call gateways on 127.0.0.1, allow-listed as the bench does
(``TARGET_ALLOWLIST``): a literal loopback address is refused at create otherwise."""

from __future__ import annotations

import pytest

from crondepot.job.guard import ALLOWLIST_ENV
from crondepot_testkit import chaos_model


@pytest.fixture(autouse=True)
def _gateways_allow_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, chaos_model.TARGET_ALLOWLIST)
