"""Two worker hosts on one engine, one PostgreSQL and one OpenSearch: ``kill -9`` of one host's worker mid-run
(hatchet-lite v0.105.0).

Spec: insertion-pipeline.md "Failure modes" (worker death mid-stage: the replay claims the durable row and
resumes) and work-queue.md "Lease-Based Claiming" (a claim of another host is recovered by its timeout, not by
a pid check). Each worker runs in a network namespace of its own and under its own host name
(``tests/helpers/netns.py``: ``host-a``, ``host-b``, each joined by a veth pair to a bridge on the test
machine), so for claim liveness (``ki.core.liveness``) and for the network they are two hosts: the machine's
loopback is out of their reach (checked), and they reach the engine's gRPC and REST ports, PostgreSQL and the
OpenSearch node over TCP at the bridge's address (relays in front of the session's services, which listen on
the loopback or a Unix socket).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from ki.app.launch import launch_insertion
from tests.helpers.hatchet_harness import (
    configure,
    indexed_and_recorded,
    network_env,
    opensearch_index,
    q,
    scan,
    write_docs,
)
from tests.helpers.netns import NetworkHosts
from tests.helpers.outage import wait_until

pytestmark = [pytest.mark.hatchet, pytest.mark.opensearch, pytest.mark.timeout(400)]

DOCS = 24
CLAIM_TIMEOUT = 8


def test_a_killed_hosts_claims_are_recovered_by_the_other_host(hx, make_ctx, tmp_path, monkeypatch,
                                                                opensearch_node):
    """host-b is SIGKILLed while it holds convert claims: host-a's replayed tasks wait for those claims to go
    stale (``claim_timeout_seconds``; host-a cannot see host-b's processes), recover them as ``StaleClaim``
    and finish them; every document is done and indexed exactly once and the run completes."""
    monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")
    root = tmp_path / "share"
    write_docs(root, DOCS)
    ctx = make_ctx(hatchet_document_concurrency=16)
    configure(ctx.settings.data_dir, "hatchet", claim_timeout_seconds=CLAIM_TIMEOUT)
    backend = opensearch_index(ctx, opensearch_node.url)
    slow = {"KI_TEST_SLOW": "convert:2"}
    with NetworkHosts(["host-a", "host-b"]) as network:
        try:
            env = network_env(network, hx.engine, ctx.settings.database_url, opensearch_node.url)
            # another host: the machine's loopback services are out of reach, the relays on the bridge are not
            assert not network.reaches("host-a", hx.engine.grpc_host_port)
            assert network.reaches("host-b", env["HATCHET_CLIENT_HOST_PORT"])
            hx.start_worker(slots=4, env={**env, **slow}, host="host-a", network=network)
            b = hx.start_worker(slots=4, env={**env, **slow}, host="host-b", network=network)
            hx.wait_workers_active(2)
            scan(ctx, root)
            run_id = launch_insertion(ctx, trigger="test").run_id

            held_by_b = "SELECT id FROM processing_state WHERE status = 'running' AND claimed_by LIKE 'host-b:%'"
            assert wait_until(lambda: q(ctx, held_by_b), 120, step=0.1), hx.diagnostics(ctx)
            killed_at = q(ctx, "SELECT now()")[0][0]
            hx.kill_worker(b)
            held = [r[0] for r in q(ctx, held_by_b)]
            assert held

            hx.wait_run(ctx, run_id, timeout=300)
            accepted = {r.address: r.accepted for r in network.relays}
            relayed = {"gRPC": accepted[env["HATCHET_CLIENT_HOST_PORT"]],
                       "PostgreSQL": accepted[urlsplit(env["KI_DATABASE_URL"]).netloc.rpartition("@")[2]],
                       "OpenSearch": accepted[urlsplit(env["KI_COMPONENTS__OPENSEARCH_URL"]).netloc]}
        finally:
            hx.stop_all()  # before the namespaces and relays go
    rows = q(ctx, "SELECT stage, count(*), min(completions), max(completions) FROM processing_state "
                  "WHERE status = 'done' GROUP BY stage ORDER BY stage")
    assert [tuple(r) for r in rows] == [(s, DOCS, 1, 1) for s in ("convert", "fetch", "index")]
    # the engine, the database and the node were reached over the bridge (connections relayed)
    assert all(n > 0 for n in relayed.values()), relayed
    # host-b's claims: recovered by the timeout path (a stale attempt of host-b), then done on host-a
    history = q(ctx, "SELECT processing_state_id, outcome, worker, finished_at FROM work_item_attempt "
                     "WHERE processing_state_id = ANY(:ids) ORDER BY id", ids=held)
    # not the same-host pid check (at once): the claim's last heartbeat (at most a third of the timeout before
    # the kill) plus the timeout
    recovered = [(h.finished_at - killed_at).total_seconds() for h in history if h.outcome == "stale"]
    assert recovered and min(recovered) >= CLAIM_TIMEOUT * 2 / 3 - 0.5, recovered
    for row_id in held:
        mine = [(h.outcome, (h.worker or "").split(":")[0]) for h in history if h.processing_state_id == row_id]
        assert ("stale", "host-b") in mine and mine[-1] == ("done", "host-a"), (row_id, mine)
    assert q(ctx, "SELECT count(*) FROM pipeline_run_object WHERE run_id = :r AND outcome = 'done'",
             r=run_id)[0][0] == DOCS
    indexed, chunks = indexed_and_recorded(ctx, backend)
    assert indexed == chunks > 0, (indexed, chunks)
    print(f"\nhost-b killed holding {len(held)} claim(s); recovered by host-a after {min(recovered):.1f}-"
          f"{max(recovered):.1f} s (claim timeout {CLAIM_TIMEOUT} s); connections relayed {relayed}")
