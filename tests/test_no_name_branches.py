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


FAMILIES = ("delta", "spherical", "diagonal", "full", "fourier", "fourier-global")
_FAMILY = "|".join(re.escape(f) for f in FAMILIES)
FAMILY_BRANCH = re.compile(rf'''([!=]=\s*["'](?:{_FAMILY})["'])|'''
                           rf'''(\bin\s*[({{][^)}}]*["'](?:{_FAMILY})["'])|'''
                           rf'''\bin\s+(?:BLUR|FOURIER)_FAMILIES\b''')


def test_no_branch_on_a_blur_familys_name_outside_the_families():
    """What a blur family does (its covariance map and form, its learnt block, whether
    its bases are points or frequency features) is asked of its object
    (``saspa_dask/core/blur_families.py``)."""
    found = []
    for path in sorted((ROOT / "saspa_dask").rglob("*.py")):
        if path.name in ("blur_families.py", "kernels.py") or "parameters" in path.parts:
            continue  # the families themselves, their re-export, the choices' table
        for number, line in enumerate(_code_lines(path), start=1):
            code = line.split("#", 1)[0]
            if FAMILY_BRANCH.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], found
    for code in ('if blur == "full":', "elif self.family == 'diagonal':",
                 'if blur in FOURIER_FAMILIES:', 'x = blur != "delta"'):
        assert FAMILY_BRANCH.search(code), code


def test_the_learnt_blocks_keep_every_blur_positive_definite_and_invert():
    """Each family's parameters: from_vector(vector(C)) is C, any parameter vector gives
    positive definite blurs, and chain() is the gradient of <G, C(p)> by central
    differences (independent of the family's own formula)."""
    import numpy as np

    from saspa_dask.core.blur_families import blur_family

    rng = np.random.default_rng(0)
    M, d = 3, 3
    A = rng.normal(size=(M, d, d))
    dense = A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(d)
    for name in ("spherical", "diagonal", "full"):
        family = blur_family(name)
        covs = family.stored(family.covariances(dense))
        p = family.vector(covs)
        assert p.shape == (M, family.width(d))
        np.testing.assert_allclose(family.from_vector(p, d), covs, rtol=1e-12)
        wild = family.from_vector(rng.normal(scale=3.0, size=p.shape), d)
        matrices = wild if wild.ndim == 3 else np.stack([np.diag(w) for w in wild])
        assert np.all(np.linalg.eigvalsh(matrices) > 0)
        G = rng.normal(size=(M, d, d))
        G = G + np.swapaxes(G, 1, 2)
        G_stored = G if family.dense else np.diagonal(G, axis1=1, axis2=2)

        def inner(q):
            return float((family.from_vector(q, d) * G_stored).sum())

        numeric = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            step = np.zeros_like(p)
            step[idx] = 1e-6
            numeric[idx] = (inner(p + step) - inner(p - step)) / 2e-6
        np.testing.assert_allclose(family.chain(covs, G_stored), numeric, rtol=1e-6,
                                   atol=1e-7)
    assert not blur_family("delta").blurred and blur_family("full").dense
    assert blur_family("fourier").frequency and not blur_family("fourier-global").centres_learnt
