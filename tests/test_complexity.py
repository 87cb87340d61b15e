"""No function in src/cnnbench is more complex than radon's grade C (issue 45).

The test does what ``radon cc -n D src`` does, through radon's API: it reads the cyclomatic
complexity of every function, method and class in every ``.py`` under src/cnnbench
(:func:`radon.complexity.cc_visit`) and fails naming each of rank D or worse
(:func:`radon.complexity.cc_rank`: D is a complexity of 21 or more). A function that grows past
C is split into functions of one concern each.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_rank, cc_visit

SRC = Path(__file__).resolve().parent.parent / "src" / "cnnbench"
WORST_ALLOWED = "C"


def _too_complex(root: Path) -> list[str]:
    """``path:line name (rank, complexity)`` of every block under ``root`` ranked worse than
    :data:`WORST_ALLOWED`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            rank = cc_rank(block.complexity)
            if rank > WORST_ALLOWED:
                found.append(f"{path.relative_to(root).as_posix()}:{block.lineno} {block.fullname} "
                             f"({rank}, {block.complexity})")
    return found


def test_no_function_is_ranked_d_or_worse():
    found = _too_complex(SRC)
    assert not found, "ranked D or worse by radon (split them):\n" + "\n".join(found)


def test_the_check_names_a_function_and_a_method_ranked_d(tmp_path):
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(20))  # complexity 21: D
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "simple.py").write_text("def fine(x):\n    return x if x else 0\n")
    (tmp_path / "pkg" / "tangled.py").write_text(
        f"def tangled(x):\n{branches}    return None\n\n\n"
        "class Holder:\n    def method(self, x):\n" + branches.replace("    ", "        ") + "        return None\n")
    assert _too_complex(tmp_path) == ["pkg/tangled.py:1 tangled (D, 21)", "pkg/tangled.py:45 Holder (D, 22)",
                                      "pkg/tangled.py:46 Holder.method (D, 21)"]
