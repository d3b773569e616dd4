"""Issue 14 item 10: the web page in headless Chromium (Debian's, driven by Playwright):
it draws the running topology's components and edges, a component page shows its errors
with their tracebacks, and a kill from the page stops the run. Screenshots are written
to the test's tmp dir (and to $STORMISH_SCREENSHOTS when set)."""

from __future__ import annotations

import os
import shutil

import pytest

from .test_rest_api import start

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser():
    if CHROMIUM is None:
        why = "no chromium on this machine (apt-get install chromium)"
        print(f"\nSKIPPED browser tests: {why}")
        pytest.skip(why)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install -e '.[browser]')"
        print(f"\nSKIPPED browser tests: {why}")
        pytest.skip(why)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def shot(page, tmp_path, name: str) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    keep = os.environ.get("STORMISH_SCREENSHOTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(path, os.path.join(keep, name))


def test_the_page_draws_the_topology_shows_errors_and_kills_it(browser, tmp_path):
    proc, url = start(tmp_path)
    try:
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        page.goto(url + "/#/topology/restful")
        for comp in ("numbers", "picky", "sink"):
            page.wait_for_selector(f"#graph g.node[data-component='{comp}']", timeout=30_000)
        assert page.inner_text("#topology-status") == "RUNNING"
        assert page.locator("#graph path.edge").count() == 2
        # the page refreshes itself: the sink's rate and the bolts' table fill in
        page.wait_for_function(
            "document.querySelector('#graph g.node[data-component=\"sink\"]')"
            ".textContent.includes('/s')",
            timeout=30_000,
        )
        shot(page, tmp_path, "topology.png")
        page.click("#graph g.node[data-component='picky'] a")
        page.wait_for_selector("#component-name", timeout=30_000)
        page.wait_for_selector("pre.error", timeout=30_000)
        errors = page.locator("pre.error").all_inner_texts()
        assert errors and all("ValueError: no multiples of 500" in e for e in errors)
        assert "Traceback" in errors[0]
        shot(page, tmp_path, "component.png")
        page.goto(url + "/#/topology/restful")
        page.wait_for_selector("#kill", timeout=30_000)
        page.on("dialog", lambda d: d.accept())  # "Kill topology restful?"
        page.click("#kill")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "topology 'restful': killed from the web UI after" in out
    assert (tmp_path / "topology.png").stat().st_size > 10_000
