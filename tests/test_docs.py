"""The front door and docs/: every committed study has a page whose generated block regenerates from its records
byte for byte, and so does the README's table of studies, with or without a data folder; every command in docs/
and the README parses against the command line as written (a run is the quick start's job, tests/test_readme.py);
no line narrates a past run (commits, hosts), outside the generated blocks that name the machine they came from."""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import typer
from typer._click.exceptions import ClickException  # typer vendors click: its commands raise these
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from tests.conftest import ROOT

DOCS = ROOT / "docs"
RECORDS = ROOT / "leaderboards" / "records"
STUDIES = sorted(p.name for p in RECORDS.iterdir() if p.is_dir())
runner = CliRunner()


@pytest.fixture
def no_data(tmp_path, monkeypatch) -> Path:
    """A data folder that does not exist: the report reads the records alone."""
    monkeypatch.setenv("BERTBENCH_DATA_DIR", str(tmp_path / "no-data"))
    return tmp_path / "no-data"


DRAFT_MARK = "<!-- bertbench draft: pre-registered; no records yet -->"


def test_every_committed_study_has_a_page_and_every_page_a_study():
    """A page without records is a pre-registered study's draft (it says so), for a preset that exists."""
    pages = {p.stem: p.read_text(encoding="utf-8") for p in (DOCS / "studies").glob("*.md")}
    drafts = sorted(name for name, text in pages.items() if DRAFT_MARK in text)
    assert STUDIES and sorted(set(pages) - set(drafts)) == STUDIES and not set(drafts) & set(STUDIES)
    assert all((ROOT / "recipes" / "presets" / f"{name}.yaml").is_file() for name in drafts)


@pytest.mark.parametrize("study", STUDIES)
def test_a_study_page_regenerates_from_its_records_byte_for_byte(study, tmp_path, no_data):
    """What `make leaderboard PRESET=study` writes into docs/studies/STUDY.md is what is committed there."""
    page = tmp_path / f"{study}.md"
    shutil.copy(DOCS / "studies" / f"{study}.md", page)
    page.write_text(re.sub(r"(<!-- bertbench report: begin \S+ -->\n).*?(<!-- bertbench report: end)", r"\1\2",
                           page.read_text(encoding="utf-8"), flags=re.S), encoding="utf-8")  # nothing left to keep
    r = runner.invoke(app, ["report", str(RECORDS / study), "--out", str(tmp_path / "out" / f"{study}.md"),
                            "--embed", str(page)])
    assert r.exit_code == 0, r.output
    assert page.read_bytes() == (DOCS / "studies" / f"{study}.md").read_bytes()


def test_the_readme_table_of_studies_regenerates_byte_for_byte(tmp_path, monkeypatch, no_data):
    """`make studies-table` in a clone: README.md, docs/studies and leaderboards/records as the repository has them."""
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / "leaderboards").symlink_to(ROOT / "leaderboards")
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    emptied = re.sub(r"(<!-- bertbench report: begin studies -->\n).*?(<!-- bertbench report: end studies -->)",
                     r"\1\2", readme, flags=re.S)
    assert emptied != readme  # the README has the generated table
    (tmp_path / "README.md").write_text(emptied, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["report", "leaderboards/records", "--studies", "docs/studies", "--embed", "README.md"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "README.md").read_bytes() == (ROOT / "README.md").read_bytes()
    for study in STUDIES:  # one row per study, linking its page
        assert f"| [{study}](docs/studies/{study}.md) |" in readme


def test_a_study_row_is_its_claim_judged_on_its_records(tmp_path, no_data):
    """The headline comes from the records: the claim named on the page, as the claims table judges it; a page
    without the marked line, or naming an unknown claim, is one error line."""
    from bertbench.report.model import collect
    from bertbench.report.tables.studies import read_study_page, studies_table
    from bertbench.results import load_records

    page = tmp_path / "cpu-quick.md"
    page.write_text("# x\n\n<!-- bertbench study: question=Q?; claim=pretraining-vs-random -->\n", encoding="utf-8")
    data = collect(load_records([RECORDS / "cpu-quick"]))
    (row,) = studies_table([(read_study_page(page), data, "p.md")]).rows
    assert row[:2] == ("[cpu-quick](p.md)", "Q?") and row[2].startswith("tiny MLM+NSP − tiny random init")
    assert row[3] == "-0.2 [-3.0, +2.7]" and row[4].startswith("inconclusive")
    page.write_text("<!-- bertbench study: question=Q?; claim=no-such-claim -->\n", encoding="utf-8")
    with pytest.raises(BertbenchError, match="claim 'no-such-claim' is not in claims.yaml"):
        studies_table([(read_study_page(page), data, "p.md")])
    page.write_text("# a page without the line\n", encoding="utf-8")
    with pytest.raises(BertbenchError, match="needs exactly one line '<!-- bertbench study: question="):
        read_study_page(page)


def test_studies_takes_one_folder_and_embed_only(tmp_path, no_data):
    (tmp_path / "R.md").write_text("x\n")
    r = runner.invoke(app, ["report", str(RECORDS), "--studies", str(DOCS / "studies"), "--embed",
                            str(tmp_path / "R.md"), "--csv", str(tmp_path / "x.csv")])
    assert r.exit_code != 0 and "--studies takes one RESULTS_DIR" in r.output and "--csv" in r.output
    assert not (tmp_path / "x.csv").exists()


# --- every command in the docs parses as written -------------------------------------------------------------


def _commands(text: str) -> list[str]:
    """The `bertbench ...` command lines of the ```bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip().rstrip("&").strip()
            line = re.sub(r"^(srun .*?)?(?=bertbench )", "", line)  # `srun bertbench ...` as a cluster runs it
            if line.startswith("bertbench "):
                out.append(line)
    return out


def _as_argv(line: str) -> list[str]:
    line = re.sub(r"\$\{?\w+(:-[^}]*)?\}?", "x", line)  # $DATA, ${BERTBENCH_DATA_DIR:-...}, $size
    line = re.sub(r"\{([^,{}]+),[^{}]*\}", r"\1", line)  # {tiny,mini}.json: one of them
    words = shlex.split(line)  # a quoted '>' (a claim's "stsb > 0") is an argument, an unquoted one a redirection
    cut = next((i for i, w in enumerate(words) if w in (">", ">>", "|", "2>", "&>")), len(words))
    return words[1:cut]


DOC_FILES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
COMMANDS = [(path.relative_to(ROOT).as_posix(), line) for path in DOC_FILES
            for line in _commands(path.read_text(encoding="utf-8"))]


def test_the_docs_have_commands_to_check():
    assert len(COMMANDS) > 40 and {p for p, _ in COMMANDS} >= {"README.md", "docs/usage.md", "docs/scale.md"}


@pytest.mark.parametrize("where, line", COMMANDS, ids=[f"{p}:{i}" for i, (p, _) in enumerate(COMMANDS)])
def test_a_command_in_the_docs_parses(where, line):
    """Each option is one the command has, with a value of its type (what a run would reject first)."""
    command = typer.main.get_command(app)
    args = _as_argv(line)
    names = []
    while hasattr(command, "commands"):  # a group: the next word names the subcommand
        name, args = args[0], args[1:]
        assert name in command.commands, f"{where}: `bertbench {' '.join(names + [name])}` is no command"
        names.append(name)
        command = command.commands[name]
    try:
        command.make_context(" ".join(["bertbench", *names]), list(args))
    except typer.Exit:
        pass
    except ClickException as err:
        pytest.fail(f"{where}: {line}\n  {err.format_message()}")


# --- no experiment log in prose -------------------------------------------------------------------------------

GENERATED = re.compile(r"<!-- bertbench (report|bench|run): begin (\S+) -->.*?<!-- bertbench \1: end \2 -->", re.S)
# a commit named in prose, a host's story (the before-stop check's words), a timing history
NARRATION = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b|(this|that|the reference|a slow|a fast)(er)? "
                       r"host|on a host (with|of)|\bsession\b|\bthe run before\b|\bat commit\b")


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_line_narrates_a_past_run(path):
    text = GENERATED.sub("", path.read_text(encoding="utf-8"))
    found = [f"{i}: {line}" for i, line in enumerate(text.splitlines(), 1) if NARRATION.search(line)]
    assert found == [], f"{path}: host, commits and times belong in stages.json and the records:\n" + "\n".join(found)


def test_the_readme_is_a_front_door():
    """At most 250 lines; the two commands, and the data folder they need, within the first 30."""
    lines = ROOT.joinpath("README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    head = "\n".join(lines[:30])
    assert "make demo" in head and "make test" in head and "../shared/data" in head
    assert head.index("../shared/data") < head.index("make demo   #")  # what they need, first
