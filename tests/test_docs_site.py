"""The documentation site (issue #31) opens in headless Chromium with no broken internal link.

`.ci/run` builds the site (`python -m sphinx -W ... docs docs/_build/html`, warnings as errors) before the tests; run alone,
this test builds it first. Every page reachable from index.html is opened in Chromium (selenium driving Debian's
chromium-driver) over a local HTTP server; every same-site link must reach a page or file that exists, every
`#fragment` an element of the target page, and every image, script and style sheet of a page must load."""

from __future__ import annotations

import ast
import functools
import http.server
import re
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "_build" / "html"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# Each page's targets: links, and the resources the page loads (a missing one is a broken page).
_TARGETS = """return {
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  resources: [...Array.from(document.querySelectorAll('script[src]')).map(e => e.src),
              ...Array.from(document.querySelectorAll('link[rel=stylesheet][href]')).map(e => e.href),
              ...Array.from(document.images).map(e => e.src)],
  broken_images: Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id)
       .concat(Array.from(document.querySelectorAll('a[name]')).map(e => e.name)),
  title: document.title,
};"""


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "index.html").exists():
        build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                                str(ROOT / "docs"), str(SITE)], capture_output=True, text=True)
        assert build.returncode == 0, f"the site does not build:\n{build.stderr[-4000:]}"
    return SITE


@pytest.fixture(scope="module")
def server(site: Path):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # the browser closing a connection early is no error
        pass


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install '.[docs]' (selenium drives Chromium)")
    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), \
        "headless Chromium is needed: apt-get install chromium chromium-driver (as .ci/run does)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@functools.cache
def _exists(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status == 200
    except urllib.error.URLError:
        return False


def _crawl(browser, root: str) -> tuple[dict[str, dict], list[str]]:
    """Every page reachable from index.html: its targets as the browser sees them, and the problems found."""
    pages: dict[str, dict] = {}
    problems: list[str] = []
    queue = [root + "index.html"]
    while queue:
        url = queue.pop()
        if url in pages:
            continue
        browser.get(url)
        found = browser.execute_script(_TARGETS)
        pages[url] = found
        if not found["title"] or "404" in found["title"]:
            problems.append(f"{url}: no page")
        problems += [f"{url}: image does not load: {src}" for src in found["broken_images"]]
        for target in found["links"] + found["resources"]:
            if not target.startswith(root):
                continue
            page = urldefrag(target).url.split("?")[0]
            if page.endswith("/"):
                page += "index.html"
            if page.endswith(".html"):
                if page not in pages:
                    queue.append(page)
            elif not _exists(page):
                problems.append(f"{url}: {target} does not exist")
    return pages, problems


def test_every_page_opens_and_every_internal_link_resolves(server, browser):
    pages, problems = _crawl(browser, server)
    for url, found in pages.items():
        for target in found["links"]:
            if not target.startswith(server):
                continue
            page, fragment = urldefrag(target)
            page = page.split("?")[0]
            page = page + "index.html" if page.endswith("/") else page
            if page.endswith(".html") and page not in pages:
                problems.append(f"{url}: {target} does not exist")
            elif fragment and page in pages and fragment not in pages[page]["ids"]:
                problems.append(f"{url}: {target}: no element #{fragment}")
    assert not problems, "\n".join(sorted(set(problems)))
    names = {urlsplit(url).path.lstrip("/") for url in pages}
    # The site's parts are all reachable from the front page.
    for part in ("getting-started.html", "guide/notions.html", "reference/cli.html", "reference/json.html",
                 "reference/api/index.html", "design.html", "references.html", "tutorials/household-counts.html",
                 "tutorials/year-of-days.html", "tutorials/calibration.html"):
        assert part in names, f"{part} is not reachable from index.html"


# "seed 004" or a bare paper number ("004's integrals", "(004 §1, Example 2)"), not "1,000" or "0.004"
SEED_NUMBER = re.compile(r"[Ss]eeds? 00[0-4]|(?<![\w.,+\-/–])00[0-4](?!\w|[.,/–-]\d)")
SEED_PAGES = {"design.md", "references.md"}  # the design notes and the bibliography map seed numbers to papers


def _user_pages() -> dict[str, str]:
    """The text of the site's pages a user reads, of what they include, and of the READMEs, by path."""
    pages = [p for p in sorted((ROOT / "docs").rglob("*")) if p.suffix in (".md", ".ipynb")
             and "_build" not in p.parts and p.relative_to(ROOT / "docs").as_posix() not in SEED_PAGES]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in pages}
    for page in pages:
        for target, obj in re.findall(r"\{literalinclude\}\s+(\S+)\n(?::pyobject:\s+(\S+))?", texts[str(page.relative_to(ROOT))]):
            path = (page.parent / target).resolve()
            text = path.read_text(encoding="utf-8")
            if obj:  # only that class or function is shown
                node = next(n for n in ast.walk(ast.parse(text)) if getattr(n, "name", None) == obj)
                text = ast.get_source_segment(text, node)
            texts[f"{path.relative_to(ROOT)}{':' + obj if obj else ''}"] = text
    for readme in (ROOT / "README.md", ROOT / "reports" / "README.md"):
        texts[str(readme.relative_to(ROOT))] = readme.read_text(encoding="utf-8")
    return texts


def test_pages_name_papers_not_seed_numbers():
    """What a user reads names the paper ("Wu et al."); the API pages' docstrings are rewritten at build time
    (docs/conf.py), which test_the_rendered_pages_... checks on the built site."""
    seen = [f"{name}: {text[max(0, m.start() - 40):m.end() + 20]!r}"
            for name, text in _user_pages().items() for m in SEED_NUMBER.finditer(text)]
    assert seen == []


def test_the_readme_points_into_the_site_and_every_link_exists():
    """The README is short: its two set-up commands first (in a virtual environment), then links into docs/
    that all exist."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    venv, audit = blocks[0].split("\n")
    assert venv == "python3 -m venv .venv && . .venv/bin/activate"
    assert audit.startswith("pip install . && ddpbayes audit ") and " --claim " in audit
    assert "python -m sphinx -W" in blocks[1] and "python -m pytest -q" in blocks[1]
    links = [target for target in re.findall(r"\]\(([^)#]+)\)", text) if "://" not in target]
    assert any(target.startswith("docs/") for target in links)
    missing = [target for target in links if not (ROOT / target).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"



def _readme_audit() -> tuple[str, list[str], str]:
    """The README's first audit command, the output lines it quotes, and the README's text."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    audit = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)[0].split("\n")[1].split(" && ", 1)[1]
    quoted = [" ".join(line.split()) for line in re.findall(r"```text\n(.*?)\n```", text, flags=re.S)[0].split("\n")]
    return audit, quoted, text


def test_the_readme_quotes_the_household_leakage_and_its_verdict():
    """The leakage the README quotes is the household's idp (tests/bruteforce.py's hand derivation: the
    count of n = 4 members, Laplace b = 1/ε = 1), and the verdict and exit code follow from it and the claim."""
    import bruteforce

    audit, quoted, text = _readme_audit()
    args = shlex.split(audit)
    claim, epsilon = (float(args[args.index(flag) + 1]) for flag in ("--claim", "--epsilon"))
    leakage = float(next(line for line in quoted if line.startswith("leakage ")).split()[1])
    assert leakage == pytest.approx(bruteforce.household_idp_closed_form(4, 1 / epsilon), abs=5e-6)
    assert f"claim {claim:g} verdict FAIL" in quoted and leakage > claim and "(exit code 1)" in text


@pytest.mark.slow
def test_the_readme_quotes_what_its_first_audit_prints(capsys):
    """The lines the README quotes are what its audit prints, and it exits as the README says."""
    from ddpbayes.cli.main import main

    audit, quoted, text = _readme_audit()
    code = main(shlex.split(audit)[1:])
    printed = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert [line for line in quoted if line not in printed] == []
    assert f"(exit code {code})" in text
