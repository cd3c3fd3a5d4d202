"""No behaviour branches on a likelihood's name outside the likelihood objects (issue
56): what a likelihood does (its damping, whether its sites are exact in a sweep,
where its offset goes, its point prediction, observation variance and intervals) is
asked of the object (``saspa_dask/core/likelihoods``), never decided by comparing
its name."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("gaussian", "probit", "logistic", "step", "noisy_probit", "poisson", "student_t")
_NAME = "|".join(NAMES)
# a comparison with a name, a membership test in a literal tuple or set holding one,
# or a lookup table keyed by two names or more
BRANCH = re.compile(rf'''([!=]=\s*["'](?:{_NAME})["'])|'''
                    rf'''(\bin\s*[({{][^)}}]*["'](?:{_NAME})["'])|'''
                    rf'''(\{{\s*["'](?:{_NAME})["']\s*:[^}}]*["'](?:{_NAME})["']\s*:)''')


def _code_lines(path):
    """The file's lines outside docstrings (a docstring may name likelihoods)."""
    text = path.read_text()
    text = re.sub(r'"""(?:.|\n)*?"""', lambda m: "\n" * m.group(0).count("\n"), text)
    return text.splitlines()


def test_no_branch_on_a_likelihood_name_outside_the_likelihoods():
    found = []
    for path in sorted((ROOT / "saspa_dask").rglob("*.py")):
        if "likelihoods" in path.parts:
            continue
        for number, line in enumerate(_code_lines(path), start=1):
            code = line.split("#", 1)[0]
            if BRANCH.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], found


def test_the_pattern_finds_what_it_is_for():
    """The check is not vacuous: it finds the branches this change removed."""
    for code in ('if self.likelihood == "poisson":', "x = {'step': 0.8, 'noisy_probit': 0.8}",
                 'if name in ("gaussian", "student_t"):', "if fitted.likelihood != 'gaussian':"):
        assert BRANCH.search(code), code
    assert not BRANCH.search('likelihood="probit", label_noise=0.01')
    assert not BRANCH.search('done.append({"step": i, "kind": kind})')
