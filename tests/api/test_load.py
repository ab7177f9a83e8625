"""The API under more concurrent requests than it has database connections."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings
from tests.support.api import EMI, bearer
from tests.support.pooler import api_app


def test_fifty_concurrent_creates_with_a_pool_of_two_all_succeed(
        db_url: str, conn: psycopg.Connection[Any], token: str) -> None:
    # Fifty requests queue for two connections: on a busy machine the last may wait past
    # the default --pool-wait, which would be a 503 (tests/acceptance/test_slow_clients.py).
    settings = ApiSettings(pool_max_size=2, rate_per_second=10_000, burst=10_000,
                           pool_wait_seconds=60)
    with TestClient(api_app(db_url, settings)) as client, ThreadPoolExecutor(50) as pool:
        def create(i: int) -> int:
            response = client.post("/v1/jobs", json={**EMI, "key": f"load-{i}"},
                                   headers=bearer(token))
            return response.status_code

        statuses = list(pool.map(create, range(50)))
    assert statuses == [201] * 50
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (50,)
