"""The documentation site (issues #31, #40) opens in headless Chromium with no broken internal link, and reads well.

`.ci/run` builds the site (`python -m sphinx -W ... docs docs/_build/html`, warnings as errors) before the tests; run
alone, this test builds it first. Every page reachable from index.html is opened once in Chromium (selenium driving
Debian's chromium-driver, a 1300 px wide window) over a local HTTP server; every same-site link must reach a page or file that
exists, every `#fragment` an element of the target page, and every image, script and style sheet of a page must load.
On every page: nothing is wider than the window, nothing sticks out of the text column unless it scrolls inside it (code
and output blocks), every displayed equation is seen whole, no build-machine path and no paper's seed number is shown,
and a command reads `$ ddpbayes ...`, never a notebook's `!ddpbayes`. The front page has a navigation sidebar."""

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

WIDTH = 1300  # px: a laptop's browser window

# Each page's targets (links, and the resources the page loads: a missing one is a broken page) and what a reader
# sees: its text, and what is wider than the window or the text column. Measured once MathJax has set the formulas.
_TARGETS = """const done = arguments[arguments.length - 1];
const typeset = window.MathJax && MathJax.startup && MathJax.startup.promise
  ? MathJax.startup.promise : Promise.resolve();
const name = e => e.tagName.toLowerCase()
  + (e.className && e.className.toString() ? '.' + e.className.toString().split(' ')[0] : '');
function outside() {  // elements past the text column's right edge that no narrower scrolling or clipping box holds
  const column = document.querySelector('.bd-article');
  if (!column) return [];
  const right = column.getBoundingClientRect().right + 1, found = [];
  for (const e of column.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= right || e.closest('mjx-assistive-mml')) continue;  // a screen reader's copy
    let box = e.parentElement;
    while (box && box !== column && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
    if (box === column || !box || box.getBoundingClientRect().right > right)
      found.push(name(e) + ' to ' + Math.round(r.right) + ' px');
  }
  return found;
}
typeset.then(() => done({
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  resources: [...Array.from(document.querySelectorAll('script[src]')).map(e => e.src),
              ...Array.from(document.querySelectorAll('link[rel=stylesheet][href]')).map(e => e.href),
              ...Array.from(document.images).map(e => e.src)],
  broken_images: Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id)
       .concat(Array.from(document.querySelectorAll('a[name]')).map(e => e.name)),
  title: document.title,
  text: document.body.innerText,
  window: window.innerWidth,
  page: document.documentElement.scrollWidth,
  outside: outside(),
  cut_equations: Array.from(document.querySelectorAll('mjx-container[display="true"]'))
                  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60)),
  sidebar: Array.from(document.querySelectorAll('.bd-sidebar-primary a[href]'))
           .filter(a => a.checkVisibility()).map(a => a.href),
}));"""


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
                 "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    driver.set_window_size(WIDTH, 900)
    # the window's outer size includes the browser's frame: make the page itself WIDTH px wide
    driver.set_window_size(2 * WIDTH - driver.execute_script("return window.innerWidth"), 900)
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
        found = browser.execute_async_script(_TARGETS)
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


@pytest.fixture(scope="module")
def crawled(server, browser) -> tuple[dict[str, dict], list[str]]:
    return _crawl(browser, server)


def test_every_page_opens_and_every_internal_link_resolves(server, crawled):
    pages, problems = crawled
    problems = list(problems)
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
                 "tutorials/year-of-days.html", "tutorials/calibration.html",
                 "tutorials/data-table-to-verdict.html"):
        assert part in names, f"{part} is not reachable from index.html"



def _by_page(pages: dict[str, dict], server: str, key: str) -> dict[str, object]:
    """`key` of every page where it is not empty, by the page's path in the site."""
    return {url[len(server):]: found[key] for url, found in pages.items() if found[key]}


def test_no_page_is_wider_than_a_1300px_window(server, crawled):
    """Code and output blocks scroll inside the text column; nothing else sticks out of it or widens the page."""
    pages, _ = crawled
    assert {found["window"] for found in pages.values()} == {WIDTH}
    assert {url: found["page"] for url, found in pages.items() if found["page"] > found["window"]} == {}
    assert _by_page(pages, server, "outside") == {}


def test_every_displayed_equation_is_seen_whole(server, crawled):
    """A displayed formula (leak(i, K)'s definition, say) fits its column: read whole, not scrolled."""
    assert _by_page(crawled[0], server, "cut_equations") == {}


def test_pages_show_commands_and_no_build_machine_paths(server, crawled):
    """A command reads as typed in a terminal (`$ ddpbayes ...`; `!ddpbayes` is a notebook's escape, and bash's history
    expansion); no output names a folder of the machine that built the site."""
    pages, _ = crawled
    text = {url[len(server):]: found["text"] for url, found in pages.items()}
    assert {url: re.findall(r"!ddpbayes.*", t) for url, t in text.items() if "!ddpbayes" in t} == {}
    assert "$ ddpbayes audit models/household.py" in text["getting-started.html"]
    paths = {url: sorted(set(re.findall(r"(?:/work/|/tmp/|/root/|/home/)\S*", t))) for url, t in text.items()}
    assert {url: found for url, found in paths.items() if found} == {}


def test_built_pages_name_papers_not_seed_numbers(server, crawled):
    """The API pages show docstrings, which cite seed numbers: the build names the papers (docs/conf.py)."""
    pages, _ = crawled
    text = {url[len(server):]: found["text"] for url, found in pages.items()}
    seen = {url: [t[max(0, m.start() - 30):m.end() + 10] for m in SEED_NUMBER.finditer(t)] for url, t in text.items()
            if url not in {"design.html", "references.html"}}
    assert {url: found for url, found in seen.items() if found} == {}


def test_the_front_page_has_a_navigation_sidebar(server, crawled):
    """index.html shows the site's parts in a sidebar, as every other page shows its section's pages."""
    sidebar = {urlsplit(url).path.lstrip("/") for url in crawled[0][server + "index.html"]["sidebar"]}
    assert {"getting-started.html", "tutorials/index.html", "guide/index.html", "reference/index.html",
            "background.html", "guide/notions.html"} <= sidebar, sidebar

# "seed 004" or a bare paper number ("004's integrals", "(004 §1, Example 2)"), not "1,000" or "0.004"
SEED_NUMBER = re.compile(r"[Ss]eeds? 00[0-4]|(?<![\w.,+\-/–])00[0-4](?!\w|[.,/–-]\d)")
SEED_PAGES = {"design.md", "references.md"}  # the design notes and the bibliography map seed numbers to papers


def _user_pages() -> dict[str, str]:
    """The text of the site's pages a user reads, of what they include, and of the READMEs, by path."""
    pages = [p for p in sorted((ROOT / "docs").rglob("*")) if p.suffix in (".md", ".ipynb")
             and "_build" not in p.parts and p.relative_to(ROOT / "docs").as_posix() not in SEED_PAGES]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in pages}
    for page in pages:
        include = r"\{literalinclude\}\s+(\S+)\n(?::pyobject:\s+(\S+))?"
        for target, obj in re.findall(include, texts[str(page.relative_to(ROOT))]):
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


def _one_line(command: str) -> str:
    """A shell command with its line continuations joined and its spaces collapsed."""
    return " ".join(command.replace("\\\n", " ").split())


def test_ci_runs_the_readme_test_command():
    """`.ci/run` runs exactly the README's test command (install, site, tests: on 2 pytest-xdist workers), and
    getting-started shows the same one."""
    readme = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)[1]
    ci = _one_line((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    started = re.findall(r"```bash\n(.*?)\n```", (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8"),
                         flags=re.S)
    assert _one_line(readme).endswith("python -m pytest -q -n 2 --dist loadfile"), readme
    assert f" {_one_line(readme)} " in f" {ci} ", ci
    assert readme in started



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
