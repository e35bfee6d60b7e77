"""Vendored browser files are the published npm files (sha256 as recorded),
ship in the package, and are served with long cache headers."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import apportion.web
from tests.web.conftest import Site

VENDOR = Path(apportion.web.__file__).parent / "static" / "vendor"


def test_vendored_files_match_their_recorded_sha256() -> None:
    record = json.loads((VENDOR / "VENDOR.json").read_text())
    files = {f["file"]: f for f in record["files"]}
    assert set(files) == {"htmx.min.js", "htmx-ext-sse.min.js", "uPlot.iife.min.js",
                          "uPlot.min.css"}
    for name, entry in files.items():
        digest = hashlib.sha256((VENDOR / name).read_bytes()).hexdigest()
        assert digest == entry["sha256"], f"{name} differs from the recorded npm file"
        assert re.fullmatch(r"\d+\.\d+\.\d+", entry["version"]) and entry["license"]
        assert (VENDOR / entry["license_file"]).is_file()
    on_disk = {p.name for p in VENDOR.iterdir()} - {"VENDOR.json"}
    assert on_disk == set(files) | {f["license_file"] for f in files.values()}


def test_assets_are_served_with_long_cache_headers(ro_site: Site) -> None:
    site = ro_site
    html = site.as_admin().get("/").text
    urls = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert len(urls) == 6 and all("?h=" in u for u in urls)
    for url in urls:
        r = site.api.get(url)
        assert r.status_code == 200, url
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert site.api.get("/static/").status_code == 404
    assert site.api.get("/static/../session.py").status_code == 404
