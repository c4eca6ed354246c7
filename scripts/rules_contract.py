"""Write pyproject.toml's independence contract of the rules from the rule registry.

No rule module may import another (what two rules share is a view or the rule kit).
import-linter's wildcards name whole module segments only (``hangdoc.rules.*`` takes the
rule kit too; ``hd*`` is not an expression it accepts), so the contract lists every
registered rule module, and this script writes that list from ``rules/__init__.py``
between its markers in pyproject.toml, as scripts/rules_doc.py writes docs/rules.md.

python scripts/rules_contract.py          # rewrite the contract in pyproject.toml
python scripts/rules_contract.py --check  # exit 1 if it is stale (a test runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

from hangdoc.rules import module_names

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
BEGIN = "# BEGIN rules' independence: written by scripts/rules_contract.py from the registry\n"
END = "# END rules' independence\n"


def render() -> str:
    rows = "".join(f'    "hangdoc.rules.{name}",\n' for name in sorted(module_names()))
    return (
        BEGIN
        + "[[tool.importlinter.contracts]]\n"
        + 'name = "no rule imports another rule (what rules share lives in analyzer/views or the'
        + ' rule kit)"\n'
        + 'type = "independence"\n'
        + "modules = [\n"
        + rows
        + "]\n"
        + END
    )


def rewritten(text: str) -> str:
    """``text`` (pyproject.toml) with the generated block replaced, or appended."""
    block = render()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        return head + block + tail
    return text.rstrip("\n") + "\n\n" + block


def main(argv: list[str]) -> int:
    text = PYPROJECT.read_text(encoding="utf-8")
    new = rewritten(text)
    if "--check" in argv:
        if new != text:
            print(f"{PYPROJECT}: the rules' independence contract is stale: run "
                  "python scripts/rules_contract.py", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    PYPROJECT.write_text(new, encoding="utf-8")
    print(f"wrote the independence contract of {len(module_names())} rules into {PYPROJECT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
