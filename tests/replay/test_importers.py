"""The three importers, each on a small fixture (docs/replay.md, "Traces")."""

from __future__ import annotations

from pathlib import Path

import pytest

from apportion.domain.errors import ValidationError
from apportion.replay.alibaba import is_alibaba, load_alibaba
from apportion.replay.csvtrace import parse_csv
from apportion.replay.scenario_trace import load_scenario_trace, org_from_scenario

FIXTURES = Path(__file__).parent / "fixtures"
ALIBABA = FIXTURES / "alibaba"


def test_alibaba_pods_become_jobs_with_trace_times_and_quarter_gpus() -> None:
    trace = load_alibaba(str(ALIBABA))
    jobs = {j.name: j for j in trace.jobs}
    # no GPUs (0002) and never scheduled (0004) are left out, and counted
    assert sorted(jobs) == ["openb-pod-0000", "openb-pod-0001", "openb-pod-0003",
                            "openb-pod-0005", "openb-pod-0006", "openb-pod-0007"]
    assert trace.counts["no_gpu"] == 1 and trace.counts["never_scheduled"] == 1
    # submitted at creation; runs deletion - scheduled
    assert (jobs["openb-pod-0001"].submit, jobs["openb-pod-0001"].duration) == (100, 750)
    assert (jobs["openb-pod-0005"].submit, jobs["openb-pod-0005"].duration) == (500, 980)
    # 460 milli -> 500, 200 -> 250; whole GPUs stay whole
    assert jobs["openb-pod-0001"].gpu_milli == 500
    assert jobs["openb-pod-0006"].gpu_milli == 250
    assert jobs["openb-pod-0003"].gpu_milli == 8000
    assert trace.counts["rounded"] == 2
    assert trace.counts["over_reserved_milli_seconds"] == 40 * 750 + 50 * 3400
    assert jobs["openb-pod-0007"].gpu_types == ("T4",)
    assert jobs["openb-pod-0000"].qos == "LS"
    assert jobs["openb-pod-0000"].cpu_milli == 12000
    assert [n.gpus for n in trace.nodes] == [2, 8, 8, 4]
    assert trace.nodes[1].gpu_type == "G2" and trace.nodes[1].cpu_milli == 96000
    assert any("1 pods without GPUs" in note for note in trace.notes)


def test_alibaba_is_recognised_by_folder_or_pod_list() -> None:
    assert is_alibaba(str(ALIBABA))
    assert is_alibaba(str(ALIBABA / "openb_pod_list_default.csv"))
    assert not is_alibaba(str(FIXTURES / "tiny.csv"))


def test_alibaba_bad_number_names_the_row_and_column(tmp_path: Path) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        (ALIBABA / "openb_node_list_gpu_node.csv").read_text())
    rows = (ALIBABA / "openb_pod_list_default.csv").read_text().splitlines()
    rows[1] = rows[1].replace(",0,5000,0", ",zero,5000,0")
    (tmp_path / "openb_pod_list_default.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(ValidationError) as err:
        load_alibaba(str(tmp_path))
    assert str(err.value).startswith("openb_pod_list_default.csv[row 2].creation_time:")


def test_alibaba_missing_column_is_named(tmp_path: Path) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text("sn,cpu_milli,memory_mib,gpu\n")
    with pytest.raises(ValidationError, match="missing column"):
        load_alibaba(str(tmp_path))


def test_csv_rows_keep_their_own_team_class_and_priority() -> None:
    trace = parse_csv((FIXTURES / "tiny.csv").read_text())
    jobs = {j.name: j for j in trace.jobs}
    assert [j.name for j in trace.jobs] == ["b-elastic", "a-reserved", "a-elastic", "b-late"]
    assert (jobs["b-elastic"].team, jobs["b-elastic"].wclass, jobs["b-elastic"].priority) == (
        "beta", "elastic", 50)
    assert jobs["b-elastic"].pods == 6 and jobs["b-elastic"].gpu_milli == 1000
    assert jobs["a-reserved"].priority is None
    assert jobs["a-elastic"].gpu_milli == 500
    assert jobs["b-elastic"].cpu_milli == 1000 and jobs["b-elastic"].memory_mib == 1024


@pytest.mark.parametrize(("text", "message"), [
    ("submit,duration,team\n1,2,a\n", "missing column(s) gpus"),
    ("submit,duration,team,gpus,colour\n1,2,a,1,red\n", "unknown column(s) colour"),
    ("submit,duration,team,gpus\n1,2,a,0.3\n", "[row 2].gpus: '0.3' is not a GPU request"),
    ("submit,duration,team,gpus,class\n1,2,a,1,gold\n",
     "[row 2].class: 'gold' is not a class (allowed: reserved, elastic)"),
    ("submit,duration,team,gpus\nsoon,2,a,1\n", "[row 2].submit: 'soon' is not a whole number"),
    ("name,submit,duration,team,gpus\nx,1,2,a,1\nx,1,2,a,1\n", "'x' appears twice"),
])
def test_csv_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_csv(text)
    assert message in str(err.value)


def test_scenario_file_gives_jobs_nodes_and_its_own_org() -> None:
    path = str(Path(__file__).parents[2] / "examples" / "s5_surplus_split.yaml")
    trace, scenario = load_scenario_trace(path)
    assert len(trace.jobs) == 144
    first = trace.jobs[0]
    assert (first.team, first.wclass, first.gpu_milli) == ("nlp", "elastic", 1000)
    assert sum(n.gpus for n in trace.nodes) == 48
    org = org_from_scenario(scenario, path)
    assert org.team_rule == "field"
    assert [t["name"] for t in org.teams] == ["production", "research"]
    research = org.teams[1]
    assert research["bursting_priority"] == 3
    assert [c["name"] for c in research["children"]] == ["nlp", "vision"]
