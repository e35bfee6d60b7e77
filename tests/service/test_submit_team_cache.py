"""Submission checks its team against a cached team tree, confirmed under the
organization row's lock: a change made elsewhere is never missed (SQLite and
PostgreSQL)."""

from __future__ import annotations

import pytest

from apportion.domain.errors import ValidationError
from apportion.service import org as org_svc
from apportion.service import tokens as tok
from apportion.service import workloads
from apportion.service.context import Ctx
from apportion.service.inputs import TeamNew
from apportion.service.loading import PARENTS_CACHE
from apportion.store.db import Database
from apportion.store.repos import workloads as wl_repo
from apportion.store.repos.workloads import WorkloadFilter


def test_a_team_change_elsewhere_is_seen_by_the_next_submission(backend_url: str) -> None:
    db = Database(backend_url)
    other = Database(backend_url)  # "another server": its own engine, same database
    try:
        db.migrate()
        secret = tok.bootstrap(db, "default", None)
        assert secret is not None
        admin = Ctx(tok.TokenVerifier(db).verify(secret), "t")
        with db.write() as s:
            org_svc.create_team(s, admin, TeamNew(slug="nlp"))
            org_svc.create_team(s, admin, TeamNew(slug="cv"))
        body = {"name": "a", "team": "nlp", "gpus": 1}
        with db.write() as s:
            workloads.submit(s, admin, workloads.parse_spec(body))  # the tree is now cached
        with db.read() as s:
            version, parents = PARENTS_CACHE.get(s, admin.org_id)
        assert parents == {"nlp": None, "cv": None}
        with other.write() as s:
            org_svc.delete_team(s, admin, "cv", None)
        with pytest.raises(ValidationError) as err, db.write() as s:
            workloads.submit(s, admin, workloads.parse_spec({**body, "team": "cv"}))
        assert err.value.field == "team" and "does not exist" in str(err.value)
        with db.read() as s:
            names = [w.name for w in wl_repo.list_workloads(
                s, admin.org_id, WorkloadFilter(), None, 100).items]
            assert PARENTS_CACHE.get(s, admin.org_id)[0] > version  # refreshed
        assert names == ["a"]  # the refused submission left nothing behind
        with other.write() as s:
            org_svc.create_team(s, admin, TeamNew(slug="cv"))
        with db.write() as s:
            workloads.submit(s, admin, workloads.parse_spec({**body, "name": "b", "team": "cv"}))
    finally:
        other.dispose()
        db.dispose()
