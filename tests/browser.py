"""The dashboard page in real headless Chromium (a plain module, shared by the tests that load it).

``rendered_dom`` is the page's DOM once its scripts ran (plotly draws the charts); ``measured``
runs a script in the page at a given window size and returns what it reports, as JSON: the
script ends by setting ``window.probe``, which is written into the DOM Chromium dumps.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

PROBE = re.compile(r'<pre id="probe">(.*?)</pre>', re.DOTALL)


def rendered_dom(page: Path, profile: Path, width: int = 1366, height: int = 900) -> str:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("headless Chromium is needed: run .ci/browser (Debian package chromium)")
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
        f"--window-size={width},{height}", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
        "--dump-dom", page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def measured(page: Path, profile: Path, script: str, width: int = 1366) -> dict:
    """What ``script`` (JavaScript that sets ``window.probe``) finds in ``page`` once it is laid
    out at ``width`` pixels: run a second after load, once plotly drew the charts' axes (it
    finishes after load; Chromium's virtual time makes the wait instant)."""
    probed = page.with_name(f"probed-{page.name}")
    runner = ("<script>window.addEventListener('load', () => setTimeout(() => {" + script +
              "; const out = document.createElement('pre'); out.id = 'probe';"
              " out.textContent = JSON.stringify(window.probe); document.body.appendChild(out); }, 1000));</script>")
    text = page.read_text(encoding="utf-8")
    end = text.rindex("</body>")  # the page's own: the inlined plotly.js may hold the string too
    probed.write_text(text[:end] + runner + text[end:], encoding="utf-8")
    found = PROBE.search(rendered_dom(probed, profile, width))
    assert found, "the probe script reported nothing"
    return json.loads(html.unescape(found.group(1)))
