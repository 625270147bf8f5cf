"""GET /metrics of the reservation service: scraped and parsed as Prometheus does, values follow the data."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.web import create_app
from tests.unit.web.conftest import T0, body, new_user

API = "/api/v1"


def scrape(client, headers) -> dict[tuple[str, tuple], float]:  # noqa: ANN001
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    out: dict[tuple[str, tuple], float] = {}
    for family in text_string_to_metric_families(r.get_data(as_text=True)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: dict, name: str, **labels: str) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_need_a_login(client, users) -> None:  # noqa: ANN001
    r = client.get("/metrics")
    assert r.status_code == 401 and b"mlte_web_" not in r.get_data()
    assert client.get("/metrics", headers={"Authorization": "Bearer mlte_wrong"}).status_code == 401
    assert client.get("/metrics", headers=users.h("alice")).status_code == 200  # any user: counts only


def test_reservations_by_state_follow_the_life_cycle(client, users, clock) -> None:  # noqa: ANN001
    m = scrape(client, users.h("alice"))
    assert value(m, "mlte_web_reservations", state="HELD") == 0
    assert value(m, "mlte_web_users", role="user", status="enabled") == 2
    assert value(m, "mlte_web_users", role="admin", status="enabled") == 1
    r = client.post(f"{API}/reservations", json=body(), headers=users.h("alice"))
    assert r.status_code == 201
    rid = r.get_json()["id"]
    m = scrape(client, users.h("bob"))  # totals over every user's reservations
    assert value(m, "mlte_web_reservations", state="HELD") == 1
    client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    m = scrape(client, users.h("bob"))
    assert value(m, "mlte_web_reservations", state="HELD") == 0
    assert value(m, "mlte_web_reservations", state="RESERVED") == 1
    clock.t = T0 + 601  # the window started: a scrape applies the time-driven transition first
    m = scrape(client, users.h("bob"))
    assert value(m, "mlte_web_reservations", state="RESERVED") == 0
    assert value(m, "mlte_web_reservations", state="PROVISIONING") == 1
    assert {k[1][0][1] for k in m if k[0] == "mlte_web_reservations"} >= {"ACTIVE", "FAILED", "DEGRADED"}


def test_requests_are_counted_by_route_method_and_status_and_timed(client, users) -> None:  # noqa: ANN001
    rid_rule = f"{API}/reservations/<int:res_id>"
    for _ in range(2):
        assert client.get(f"{API}/reservations/999", headers=users.h("alice")).status_code == 404
    assert client.get(f"{API}/reservations", headers=users.h("alice")).status_code == 200
    assert client.get(f"{API}/reservations").status_code == 401
    assert client.get("/no/such/page").status_code == 404
    assert client.open(f"{API}/reservations", method="BREW", headers=users.h("alice")).status_code == 405
    m = scrape(client, users.h("alice"))
    assert value(m, "mlte_web_requests_total", endpoint=rid_rule, method="GET", status="404") == 2
    assert value(m, "mlte_web_requests_total", endpoint=f"{API}/reservations", method="GET", status="200") == 1
    assert value(m, "mlte_web_requests_total", endpoint=f"{API}/reservations", method="GET", status="401") == 1
    assert value(m, "mlte_web_requests_total", endpoint="unmatched", method="GET", status="404") == 1
    assert value(m, "mlte_web_request_duration_seconds_count", endpoint=rid_rule, method="GET") == 2
    assert value(m, "mlte_web_requests_total", endpoint="unmatched", method="other", status="405") == 1
    assert not [k for k in m if dict(k[1]).get("method") == "BREW"]  # no label value from the request
    assert value(m, "mlte_web_request_duration_seconds_sum", endpoint=rid_rule, method="GET") > 0


def test_a_refused_form_post_is_counted_too(client, users) -> None:  # noqa: ANN001
    """A request the CSRF check refuses before any view runs is still counted and timed."""
    assert client.post("/login", data={"username": "x", "password": "y"}).status_code == 400
    m = scrape(client, users.h("alice"))
    assert value(m, "mlte_web_requests_total", endpoint="/login", method="POST", status="400") == 1
    assert value(m, "mlte_web_request_duration_seconds_count", endpoint="/login", method="POST") == 1


def test_two_apps_in_one_process_keep_their_own_registries(tmp_path, clock) -> None:  # noqa: ANN001
    apps = [create_app({"DATABASE": str(tmp_path / f"web{i}.db"), "TOPOLOGY": "fig2", "TESTING": True,
                        "CLOCK": clock, "SECRET_KEY": "test"}) for i in range(2)]
    try:
        heads = [new_user(a, "carol") for a in apps]
        a, b = (x.test_client() for x in apps)
        assert a.post(f"{API}/reservations", json=body(), headers=heads[0]).status_code == 201
        assert value(scrape(a, heads[0]), "mlte_web_reservations", state="HELD") == 1
        mb = scrape(b, heads[1])
        assert value(mb, "mlte_web_reservations", state="HELD") == 0
        assert value(mb, "mlte_web_requests_total", endpoint=f"{API}/reservations", method="POST", status="201") == 0
    finally:
        for x in apps:
            x.extensions["mlte"].db.dispose()
