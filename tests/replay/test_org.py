"""ORG.yaml: team and class mapping, the cluster, and the flattened tree."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.domain.errors import ValidationError
from apportion.replay.org import classify, cluster_nodes, hash_point, parse_org, team_of
from apportion.replay.policies import flatten
from apportion.replay.trace import Trace, TraceJob, TraceNode


def org_data(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "teams": [{"name": "a", "reservations": {"main": 2}}, {"name": "b"}],
        "mapping": {"teams": {"by": "hash", "buckets": {"a": 3, "b": 1}},
                    "classes": {"LS": {"class": "reserved", "priority": 100},
                                "BE": {"class": "elastic", "priority": 20}}},
    }
    data.update(extra)
    return data


def test_hash_buckets_are_stable_and_follow_the_weights() -> None:
    org = parse_org(org_data())
    names = [f"pod-{i}" for i in range(4000)]
    teams = [team_of(org, TraceJob(n, 0, 1, 1000)) for n in names]
    assert teams == [team_of(org, TraceJob(n, 0, 1, 1000)) for n in names]
    share = teams.count("a") / len(teams)
    assert 0.72 < share < 0.78  # weight 3 of 4
    # the rule itself: a point below 3/4 of the way is team a
    point = hash_point("pod-0")
    assert teams[0] == ("a" if point < 0.75 else "b")


def test_classes_map_qos_and_a_rows_own_class_wins() -> None:
    org = parse_org(org_data())
    jobs = [TraceJob("x", 0, 10, 1000, qos="LS"), TraceJob("y", 0, 10, 1000, qos="BE"),
            TraceJob("z", 0, 10, 1000, qos="??"),
            TraceJob("w", 0, 10, 1000, qos="LS", wclass="elastic", priority=7)]
    mapped = classify(org, jobs)
    assert mapped["x"][1:] == ("reserved", 100)
    assert mapped["y"][1:] == ("elastic", 20)
    assert mapped["z"][1:] == ("elastic", None)  # default_class, its default priority
    assert mapped["w"][1:] == ("elastic", 7)


def test_reserved_overflow_turns_reserved_work_beyond_the_reservation_elastic() -> None:
    data = org_data()
    data["mapping"]["teams"] = {"by": "field"}
    data["mapping"]["reserved_overflow"] = {"class": "elastic", "priority": 90}
    org = parse_org(data)
    jobs = [TraceJob("r1", 0, 100, 1000, qos="LS", team="a"),
            TraceJob("r2", 10, 100, 1000, qos="LS", team="a"),
            TraceJob("r3", 20, 100, 1000, qos="LS", team="a"),   # 3 > a's 2 GPUs
            TraceJob("r4", 100, 100, 1000, qos="LS", team="a"),  # r1 ended at 100
            TraceJob("r5", 30, 10, 1000, qos="LS", team="b")]    # b reserves nothing
    mapped = classify(org, jobs)
    assert {n: m[1:] for n, m in mapped.items()} == {
        "r1": ("reserved", 100), "r2": ("reserved", 100), "r3": ("elastic", 90),
        "r4": ("reserved", 100), "r5": ("elastic", 90)}


def test_cluster_gpus_keeps_the_node_mix() -> None:
    nodes = tuple(TraceNode(f"n{i}", 8 if i % 2 else 2, "G2" if i % 2 else "T4")
                  for i in range(20))  # 100 GPUs, 80 on 8-GPU nodes
    trace = Trace("t", (), nodes)
    chosen = cluster_nodes(parse_org(org_data(cluster={"gpus": 50})), trace)
    gpus = [n["gpus"] for n in chosen]
    assert sum(gpus) == 50
    assert gpus.count(8) == 5 and gpus.count(2) == 5
    with pytest.raises(ValidationError, match=r"cluster\.gpus: the trace has 100 GPUs"):
        cluster_nodes(parse_org(org_data(cluster={"gpus": 101})), trace)
    with pytest.raises(ValidationError, match=r"cluster\.nodes: this trace has no nodes"):
        cluster_nodes(parse_org(org_data()), Trace("t", ()))


@pytest.mark.parametrize(("data", "message"), [
    ({"teams": []}, "teams: at least one team is required"),
    ({"mapping": {"teams": {"by": "colour"}}}, "mapping.teams.by"),
    ({"mapping": {"teams": {"by": "hash"}}}, "mapping.teams.buckets: must map leaf teams"),
    ({"mapping": {"classes": {"LS": {"class": "gold"}}}}, "mapping.classes.LS.class"),
    ({"mapping": {"reserved_overflow": {"class": "reserved"}}},
     "mapping.reserved_overflow.class: must be elastic"),
    ({"cluster": {"gpus": 0}}, "cluster.gpus"),
    ({"colour": 1}, "colour"),
])
def test_org_errors_name_the_field(data: dict[str, Any], message: str) -> None:
    full = {"teams": [{"name": "a"}], **data}
    with pytest.raises(ValidationError) as err:
        parse_org(full)
    assert message in str(err.value)


def test_flatten_gives_leaves_their_parents_unassigned_reservation() -> None:
    teams = [
        {"name": "research", "bursting_priority": 3, "reservations": {"main": 31},
         "children": [{"name": "nlp", "bursting_priority": 2, "reservations": {"main": 20}},
                      {"name": "vision", "reservations": {"main": 10}}]},
        {"name": "production", "bursting_priority": 2, "reservations": {"main": 20.001}},
    ]
    flat = flatten(teams, "main")
    assert [(t["name"], t.get("bursting_priority"), t["reservations"]["main"]) for t in flat] == [
        ("nlp", 2, "20.5"), ("vision", None, "10.5"), ("production", 2, "20.001")]
    assert all("children" not in t for t in flat)
