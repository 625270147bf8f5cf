"""``GET /api/v1/reservations/{id}/restorations`` and the RESTORING / DEGRADED states through the API:
what the controller recorded about repairing a reservation after a failure, visible to its owner only."""
from __future__ import annotations

from app.db.migrate import open_migrated
from app.db.provisioning import ProvisioningStore
from tests.lib.provisioning import installation, light
from tests.unit.web.conftest import T0
from tests.unit.web.test_api import API, create


def test_restoring_degraded_and_restorations_are_visible(client, users, clock, app) -> None:  # noqa: ANN001
    rid = create(client, users).get_json()["id"]
    client.post(f"{API}/reservations/{rid}/commit", headers=users.h("alice"))
    clock.t = T0 + 601
    assert light(app.config["DATABASE"], rid, clock.t)
    store = ProvisioningStore(open_migrated(app.config["DATABASE"]))
    old = client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()["path"]
    assert store.mark_restoring(rid, "loss of light at X:3", clock.t + 1)
    r = client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()
    assert (r["state"], r["state_reason"]) == ("RESTORING", "loss of light at X:3")
    try_ = {"cause": "loss of light at X:3", "detected_ts": clock.t + 1, "started_ts": clock.t + 1.01,
            "old_path": old["edges"]}
    assert store.mark_degraded(rid, "no path around the failure", try_, clock.t + 2)
    assert client.get(f"{API}/reservations/{rid}", headers=users.h("alice")).get_json()["state"] == "DEGRADED"
    listed = client.get(f"{API}/reservations?state=DEGRADED", headers=users.h("alice")).get_json()
    assert [x["id"] for x in listed["items"]] == [rid]
    assert store.mark_restoring(rid, "retry 2 after a failure", clock.t + 4)
    circuit, rules = installation(old)
    assert store.mark_restored(rid, [circuit], rules, None, {**try_, "attempt": 2, "new_path": old["edges"]},
                               clock.t + 5)
    items = client.get(f"{API}/reservations/{rid}/restorations", headers=users.h("alice")).get_json()["items"]
    assert [(i["outcome"], i["attempt"]) for i in items] == [("restored", 2), ("degraded", 1)]
    assert items[1]["reason"] == "no path around the failure" and items[1]["took_s"] == 1.0
    assert items[0]["old_path"] == old["edges"] and items[0]["detected"].endswith("Z")
    hist = client.get(f"{API}/reservations/{rid}/history", headers=users.h("alice")).get_json()["items"]
    assert [h["detail"].get("to") for h in hist if h["action"] == "transition"][-4:] == [
        "RESTORING", "DEGRADED", "RESTORING", "ACTIVE"]
    assert client.get(f"{API}/reservations/{rid}/restorations", headers=users.h("bob")).status_code == 403
    assert client.get(f"{API}/reservations/99999/restorations", headers=users.h("alice")).status_code == 404
    r = client.post(f"{API}/reservations/{rid}/cancel", headers=users.h("alice"))  # ACTIVE again: cancellable
    assert r.status_code == 200 and r.get_json()["state"] == "CANCELLED"
