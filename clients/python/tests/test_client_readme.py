"""The README's examples run as written, against a live node."""

from __future__ import annotations

import re
from pathlib import Path

from tests.httpclient import ADMIN

from narad_client import Client

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(node, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    runnable = [b for b in blocks if "https://" not in b]
    assert len(runnable) == 2
    for block in runnable:
        code = (
            block.replace("http://127.0.0.1:7942", node.base)
            .replace('("admin", "secret")', repr(ADMIN))
            .replace("wait=5", "wait=1")  # the loop ends on a wait
        )
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 10
    assert sorted(line.split(" ", 2)[2] for line in printed) == sorted(
        str({"id": n}) for n in range(10)
    )
    with Client(node.base, auth=ADMIN) as narad:
        assert narad.consume("orders") is None
        narad.delete_topic("orders")
