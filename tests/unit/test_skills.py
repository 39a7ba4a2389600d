"""Agent Skills (issue 49): `SKILL.md` folders listed by name and description in the system
prompt within a budget, the body read only when the model picks the skill (read_skill),
files read only inside the skill's folder, a skill's script run only through run_command
with consent; a project's skills only once the project is trusted, listed in the question;
bad files are notices."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app.agent.mcp.setup import for_project
from app.agent.paths import ToolRefused
from app.agent.project import open_project, system_prompt
from app.agent.session import Session, ToolFinished
from app.agent.skills import CATALOG_BUDGET, discover, read_skill, skill_tool
from app.agent.toolbox import Toolbox
from backends.events import ToolCall
from tests.support.scripted_engine import ScriptedEngine, tool_call
from tests.support.session_recorder import Recorder


def skill(folder: Path, name: str, description: str, body: str = "Do the thing.\n", files: dict | None = None) -> Path:
    where = folder / name
    where.mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {name}\ndescription: {description}\n---\n" if description else "no front matter\n"
    (where / "SKILL.md").write_text(front + body)
    for relative, text in (files or {}).items():
        (where / relative).parent.mkdir(parents=True, exist_ok=True)
        (where / relative).write_text(text)
    return where


@pytest.fixture
def places(tmp_path):
    user = tmp_path / "home" / ".claude" / "skills"
    project = tmp_path / "project"
    (project / ".claude" / "skills").mkdir(parents=True)
    return user, project


def test_listed_by_description_and_read_only_when_picked(places):
    user, project = places
    skill(user, "release", "Cut a release: bump the version, tag, write the changelog.", "Step 1: bump.\n",
          {"scripts/bump.py": "print('bumped')\n"})  # fmt: skip
    skills = discover(project, [user])
    assert [s.name for s in skills.usable()] == ["release"]
    prompt = system_prompt(open_project(project), True, "2026-12-03", skills=skills.catalog())
    assert "- release: Cut a release: bump the version, tag, write the changelog." in prompt
    assert "Step 1: bump." not in prompt  # the body waits until the model reads it
    body = read_skill(skills, "release")
    assert "Step 1: bump." in body and "- scripts/bump.py" in body
    assert "print('bumped')" in read_skill(skills, "release", "scripts/bump.py")
    with pytest.raises(ToolRefused, match="not inside the skill's folder"):
        read_skill(skills, "release", "../../../secret")
    with pytest.raises(ToolRefused, match="there is no skill 'nope'"):
        read_skill(skills, "nope")


def test_the_catalog_keeps_to_its_budget(places):
    user, project = places
    for n in range(80):
        skill(user, f"s{n:02}", "x" * 150)
    catalog = discover(project, [user]).catalog()
    assert len(catalog) <= CATALOG_BUDGET + 100 and "more (read_skill with a name lists them all)" in catalog


def test_bad_skills_are_notices_and_the_rest_load(places):
    user, project = places
    skill(user, "good", "fine")
    skill(user, "nodesc", "")
    skill(user, "hidden", "looks fine\u202e")
    (project / ".claude" / "skills" / "good").mkdir()
    (project / ".claude" / "skills" / "good" / "SKILL.md").write_text("---\ndescription: the project's\n---\n")
    skills = discover(project, [user])
    assert [s.name for s in skills.skills] == ["good"]  # the user's wins over the project's
    problems = "\n".join(skills.problems)
    assert "no description" in problems and "U+202E" in problems and "came first" in problems


def test_a_project_skill_waits_for_trust_and_the_question_lists_it(places, tmp_path):
    user, project = places
    skill(project / ".claude" / "skills", "deploy", "Deploy to production with ./deploy.sh")
    skills = discover(project, [user])
    assert skills.usable() == [] and skills.catalog() == ""
    _, trust = for_project(project, {}, tmp_path / "sw.json", tmp_path / "trust.json", None, skills)
    assert trust is not None and trust.decision() is None
    asked = trust.question()
    assert "give the model these skills" in asked.title
    assert "- skill deploy (.claude/skills/deploy/SKILL.md)\n  Deploy to production" in asked.body
    trust.answer(True)
    assert [s.name for s in skills.usable()] == ["deploy"]
    (project / ".claude" / "skills" / "deploy" / "SKILL.md").write_text("---\ndescription: changed\n---\n")
    again = discover(project, [user])
    _, changed = for_project(project, {}, tmp_path / "sw.json", tmp_path / "trust.json", None, again)
    assert changed is not None and changed.decision() is None and again.usable() == []


def test_the_model_reads_a_skill_and_its_script_runs_only_with_consent(places, tmp_path):
    user, project = places
    marker = tmp_path / "ran"
    skill(user, "stamp", "Leave a stamp", "Run scripts/stamp.py.\n",
          {"scripts/stamp.py": f"open({str(marker)!r}, 'w').write('x')\n"})  # fmt: skip
    skills = discover(project, [user])
    box = Toolbox(project)
    box.add(skill_tool(skills))
    script_path = user / "stamp" / "scripts" / "stamp.py"
    engine = ScriptedEngine(
        turns=[
            [ToolCall("c_skill", "read_skill", json.dumps({"name": "stamp"}))],
            [tool_call("run_command", command=f"python3 {script_path}", outside_sandbox=True)],
            ["done"],
        ]
    )
    recorder = Recorder()
    recorder.answer = "no"
    session = Session(engine, box, recorder.ask, recorder.emit, system="s")
    asyncio.run(session.send("stamp it"))
    read, ran = recorder.of(ToolFinished)
    assert read.decision == "auto" and "Run scripts/stamp.py." in read.result
    assert ran.decision == "no" and recorder.questions and not marker.exists()


def test_a_nul_in_a_skills_file_name_is_an_error_for_the_model(places):
    user, project = places
    skill(user, "x", "y")
    skills = discover(project, [user])
    result = skill_tool(skills).handler(Toolbox(project), {"name": "x", "file": "a\0b"})
    assert result.result.startswith("error:") and "NUL" in result.result
