import pytest

from apportion.domain.errors import ValidationError
from apportion.domain.workload import TopologyMode, WorkloadClass, make_spec


def test_defaults() -> None:
    s = make_spec(name="w", team="t", gpus=1, pods=4)
    assert s.wclass is WorkloadClass.ELASTIC and s.priority == 50
    assert s.min_pods == 4 and s.gang is True
    r = make_spec(name="w", team="t", wclass="reserved", gpus=0.5)
    assert r.priority == 100 and r.gang is False


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"wclass": "reserved", "priority": 99}, "priority"),
        ({"wclass": "elastic", "priority": 100}, "priority"),
        ({"wclass": "gold"}, "class"),
        ({"pods": 0}, "pods"),
        ({"pods": 2, "min_pods": 3}, "min_pods"),
        ({"name": ""}, "name"),
        ({"topology": {"level": "rack", "mode": "sometimes"}}, "topology.mode"),
        ({"topology": {"level": "rack", "zone": "a"}}, "topology.zone"),
    ],
)
def test_spec_errors_name_the_field(kwargs: dict, field: str) -> None:
    base = {"name": "w", "team": "t", "gpus": 1}
    base.update(kwargs)
    with pytest.raises(ValidationError) as err:
        make_spec(**base)
    assert err.value.field == field


def test_topology_and_sizes() -> None:
    s = make_spec(name="w", team="t", gpus=2, pods=4, min_pods=2,
                  topology={"level": "rack", "mode": "preferred"})
    assert s.topology is not None and s.topology.mode is TopologyMode.PREFERRED
    assert s.size(81920) == 8000 and s.min_size(81920) == 4000
