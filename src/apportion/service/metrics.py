"""Prometheus metrics. Gauges that describe the current state (pending work,
GPUs in use) are computed from the database at scrape time; counters and
histograms are updated as things happen in this process."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from apportion.store.db import Database
from apportion.store.repos import orgs as org_repo
from apportion.store.repos import workloads as wl_repo

BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
           3600, 4 * 3600, 24 * 3600)


class _StateCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending = GaugeMetricFamily(
            "apportion_pending_workloads", "Waiting (Pending or Queued) workloads",
            labels=["org", "team", "reason"])
        in_use = GaugeMetricFamily(
            "apportion_gpus_in_use", "GPUs held by Starting and Running workloads",
            labels=["org", "team", "kind"])
        with self.db.read() as session:
            slugs = {o.id: o.slug for o in org_repo.list_orgs(session)}
            for org_id, team, reason, n in wl_repo.count_by_reason(
                    session, ("Pending", "Queued")):
                pending.add_metric([slugs.get(org_id, "?"), team, reason or "NONE"], n)
            sums: dict[tuple[str, str, str], int] = {}
            for org_id, team, wclass, placement in wl_repo.placements_by_team(
                    session, ("Starting", "Running")):
                milli = sum(int(d["milli"]) for p in placement or [] for d in p["devices"])
                key = (slugs.get(org_id, "?"), team, wclass)
                sums[key] = sums.get(key, 0) + milli
            for key, milli in sorted(sums.items()):
                in_use.add_metric(list(key), milli / 1000)
        yield pending
        yield in_use


class Metrics:
    """The registry of one server process."""

    def __init__(self, db: Database | None = None) -> None:
        self.registry = CollectorRegistry()
        self.admission = Histogram(
            "apportion_time_to_admission_seconds", "Seconds from submission to Starting",
            ["org", "team"], buckets=BUCKETS, registry=self.registry)
        self.preemptions = Counter(
            "apportion_preemptions", "Preemptions (whole attempts and shrinks) by victim team",
            ["org", "team"], registry=self.registry)
        self.cycle_duration = Histogram(
            "apportion_cycle_duration_seconds", "Scheduling cycle: snapshot, plan and commit",
            buckets=BUCKETS, registry=self.registry)
        self.http = Counter(
            "apportion_http_requests", "HTTP requests", ["method", "route", "status"],
            registry=self.registry)
        if db is not None:
            self.registry.register(_StateCollector(db))

    def render(self) -> bytes:
        return generate_latest(self.registry)
