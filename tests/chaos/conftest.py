"""The chaos bench's jobs call gateways on 127.0.0.1, allow-listed as the bench does
(``TARGET_ALLOWLIST``): a literal loopback address is refused at create otherwise."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos
from crondepot.worker.targets import ALLOWLIST_ENV


@pytest.fixture(autouse=True)
def _gateways_allow_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, chaos.TARGET_ALLOWLIST)
