"""The README's examples run: its Python engine example is served and answers."""

from __future__ import annotations

import re

import openai
from conftest import REPO, serve_in_thread


def python_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_engine_example_serves() -> None:
    blocks = python_blocks()
    assert blocks, "README has no python example"
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102 - our own README
    engine = namespace["EchoEngine"]()  # type: ignore[operator]
    with serve_in_thread(engine) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi there"}])
        chunks = list(
            client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi"}], stream=True)
        )
    assert "hi there" in (r.choices[0].message.content or "")
    assert r.choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()


def test_readme_commands_are_the_ci_commands() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)[1]
    # The README's test command ends with the pytest invocation that CI runs.
    assert test_cmd.split("&&")[-1].strip() in ci
    assert "smgpy serve" in re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)[0]
