"""deploy/Dockerfile read as its instructions, stage by stage (a reader of the subset
it uses: continuation lines, comments, exec-form JSON arrays)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.install import ROOT

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


@dataclass
class Instruction:
    keyword: str
    text: str

    def exec_form(self) -> list[str]:
        """The JSON array a CMD or HEALTHCHECK's CMD gives in exec form."""
        array = self.text[self.text.index("[") :]
        words = json.loads(array)
        assert isinstance(words, list), self.text
        return [str(word) for word in words]


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.base}"
        return found[-1]


def instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    parsed = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, text = line.strip().partition(" ")
            parsed.append(Instruction(keyword.upper(), text.strip()))
    return parsed


def stages(path: Path = DOCKERFILE) -> tuple[list[Instruction], list[Stage]]:
    """The instructions before the first FROM (global ARGs), and each stage."""
    preamble: list[Instruction] = []
    found: list[Stage] = []
    for instruction in instructions(path):
        if instruction.keyword == "FROM":
            words = instruction.text.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            found.append(Stage(words[0], name))
        elif found:
            found[-1].instructions.append(instruction)
        else:
            preamble.append(instruction)
    return preamble, found
