"""A model's report page (``model.report``, ``saspa report``): its numbers against the
model's own predictions computed here, every image a PNG that decodes, nothing loaded
from anywhere, and the job's refusals."""

import base64
import io

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

import browser
import in_process
from report_page import ReportPage
from saspa_dask import SASPAClassifier, SASPARegressor, jobs
from saspa_dask.datasets import synthetic_two_class


def _check_images(page):
    """Every image a PNG data URI that decodes to a picture; no other URL at all."""
    from matplotlib.image import imread

    assert page.images and all(img.get("alt") for img in page.images)
    assert all(url.startswith("data:image/png;base64,") for url in page.urls)
    for img in page.images:
        picture = imread(io.BytesIO(base64.b64decode(img["src"].split(",", 1)[1])),
                         format="png")
        assert picture.shape[0] > 100 and picture.shape[1] > 100


@pytest.fixture(scope="module")
def classifier():
    X, y = synthetic_two_class(3000, 4, seed=0)
    model = SASPAClassifier(n_bases=16, random_state=0, max_hyper_iter=8).fit(
        X[:2000], y[:2000], X_val=X[2000:], y_val=y[2000:])
    return model, X[2000:], y[2000:]


def test_a_classifiers_report_says_its_metrics_and_calibration(classifier, tmp_path):
    model, X, y = classifier
    text = model.report(X, y, path=tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == text
    page = ReportPage(text)
    _check_images(page)
    assert page.headings == ["Model", "Held-out metrics", "Calibration", "Learning",
                             "Input relevance",
                             "Probabilities against the most relevant inputs", "EP"]
    proba = model.predict_proba(X)
    codes = (y == model.classes_[1]).astype(int)
    assert float(page.cells["error"]) == pytest.approx(np.mean(model.predict(X) != y),
                                                       rel=1e-5)
    brier = np.mean((proba[:, 1] - codes) ** 2)  # scikit-learn's brier_score_loss
    assert float(page.cells["Brier score"]) == pytest.approx(brier, rel=1e-5)
    assert float(page.cells["error of always the commonest class"]) == pytest.approx(
        min(codes.mean(), 1 - codes.mean()), rel=1e-5)
    assert page.cells["AUC"] == f"{roc_auc_score(codes, proba[:, 1]):.6g}"
    # the reliability table: P(positive) in ten bins of equal row counts (the 1000
    # rows cut after every 100th by P(positive); a cut inside a run of equal
    # probabilities, such as the saturated ones, moves to the run's start), each bin's
    # rows, mean P(positive) and share of positives, here
    assert len(y) == 1000
    order = np.argsort(proba[:, 1], kind="stable")
    p, truth = proba[order, 1], codes[order]
    cuts = sorted({int(np.searchsorted(p, p[k], side="left")) for k in range(100, 1000, 100)})
    parts = [part for part in np.split(np.arange(1000), cuts) if len(part)]
    bins = [v for v in page.cells.values() if " rows, predicted " in v]
    assert bins == [f"{len(part)} rows, predicted {p[part].mean():.4f}, observed "
                    f"{truth[part].mean():.4f}" for part in parts]
    assert len(parts) >= 5
    assert page.cells["positive class"].startswith(f"{model.classes_[1]} ")
    assert page.cells["n sweeps"] == str(model.n_sweeps_)


def test_a_regressors_report_says_its_interval_coverage(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(1500, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.2 * rng.normal(size=1500)
    model = SASPARegressor(n_bases=12, random_state=0, max_hyper_iter=10).fit(X[:1000],
                                                                             y[:1000])
    page = ReportPage(model.report(X[1000:], y[1000:]))
    _check_images(page)
    mean, std = model.predict(X[1000:], return_std=True)
    z = np.abs(y[1000:] - mean) / std
    for level in (0.5, 0.9, 0.95, 0.99):
        share = np.mean(z <= norm.ppf(0.5 + level / 2))
        assert page.cells[f"{level:.0%} interval"] == f"{share:.3f} of rows"
    rmse = np.sqrt(np.mean((y[1000:] - mean) ** 2))
    assert float(page.cells["rmse"]) == pytest.approx(rmse, rel=1e-5)


def test_a_report_without_rows_shows_the_model_alone(classifier):
    model, _, _ = classifier
    page = ReportPage(model.report())
    _check_images(page)
    assert page.headings == ["Model", "Learning", "Input relevance", "EP"]
    # relevances in the inputs' own units: 1 / lengthscale, most relevant first
    order = np.argsort(model.lengthscale_)
    for j in order:
        assert page.cells[f"x{j}"].startswith(f"lengthscale {model.lengthscale_[j]:.4g}")


def test_saspa_report_on_stores_and_its_refusals(tmp_path, threads_client):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1200, 3))
    y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
    rows = ["income,age,score,label"] + [f"{a:.4f},{b:.4f},{c:.4f},{t}"
                                         for (a, b, c), t in zip(X, y)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", target="label")
    jobs.train(tmp_path / "t.zarr", tmp_path / "m.zarr", n_bases=8, max_hyper_iter=5,
               client=threads_client)
    out = tmp_path / "report.html"
    res = in_process.saspa("report", tmp_path / "m.zarr", tmp_path / "t.zarr", "--out", out,
                           "--max-rows", 500)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (f"report: {out} (metrics on all 1200 rows of "
                                  f"{tmp_path / 't.zarr'}, the plots on a sample of 500)")
    page = ReportPage(out.read_text())
    _check_images(page)
    # the metrics are of every row (as saspa evaluate's), the other sections of 500
    from saspa_dask import load_model

    fitted = load_model(tmp_path / "m.zarr")
    assert page.cells["rows"] == "1200"
    assert page.cells["error"] == f"{np.mean(fitted.predict(X) != y):.6g}"
    assert "all 1200 rows (the metrics of saspa evaluate); the sections below are on a " \
           "seeded sample of 500 of them" in out.read_text()
    assert {"income", "age", "score"} <= set(page.cells)  # relevances by column name
    # t.zarr is the model's own training store: its metrics are not called held out,
    # by the report or by evaluate; a store split off is held out
    assert "Metrics on the training rows (not held out)" in out.read_text()
    assert "Held-out metrics" not in out.read_text()
    own = jobs.evaluate(tmp_path / "m.zarr", tmp_path / "t.zarr", client=threads_client)
    assert own["training_data"] is True
    assert "(the model's own training rows, not held out; 1200 rows" in jobs.metrics_line(own)
    parts = jobs.split(tmp_path / "t.zarr", test_fraction=0.25, seed=1)
    held = jobs.evaluate(tmp_path / "m.zarr", parts["test"], client=threads_client)
    assert held["training_data"] is False and "not held out" not in jobs.metrics_line(held)
    other = in_process.saspa("report", tmp_path / "m.zarr", parts["test"], "--out",
                             tmp_path / "h.html")
    assert other.returncode == 0, other.stderr
    assert "Held-out metrics" in (tmp_path / "h.html").read_text()
    # saspa info says the lengthscales by column name too
    lengthscale = load_model(tmp_path / "m.zarr").lengthscale_
    shown = in_process.saspa("info", tmp_path / "m.zarr").stdout
    assert ("lengthscales: " + ", ".join(f"{c} {v:.4g}" for c, v in zip(
        ("income", "age", "score"), lengthscale))) in shown
    again = in_process.saspa("report", tmp_path / "m.zarr", "--out", out)
    assert again.returncode == 1 and "exists; pass --overwrite" in again.stderr
    assert "seeded sample of 500 of them" in out.read_text()  # the old page untouched
    # rows to score: the training encoding, no target column
    (tmp_path / "x.csv").write_text("\n".join(r.rsplit(",", 1)[0] for r in rows) + "\n")
    jobs.ingest(tmp_path / "x.csv", tmp_path / "x.zarr", like=tmp_path / "t.zarr")
    no_y = in_process.saspa("report", tmp_path / "m.zarr", tmp_path / "x.zarr", "--out",
                            tmp_path / "n.html")
    assert no_y.returncode == 1 and "no target column y" in no_y.stderr
    assert not (tmp_path / "n.html").exists()


def test_a_job_files_report_step_writes_the_page_once(tmp_path, classifier):
    model, X, y = classifier
    model.save(tmp_path / "m.zarr")
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr")
    job = tmp_path / "job.toml"
    job.write_text('[[steps]]\nkind = "report"\nmodel = "m.zarr"\ndata = "d.zarr"\n'
                   'out = "page.html"\nmax_rows = 300\n')
    first = in_process.saspa("run", job)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"report: {tmp_path / 'page.html'}"
    page = (tmp_path / "page.html").read_text()
    assert ReportPage(page).cells["rows"] == str(len(y))
    assert "seeded sample of 300 of them" in page
    # the job's step table: its one step, what it wrote
    table = first.stderr.strip().splitlines()[-3:]
    assert table[0].startswith("job job: 1 step(s) done in ")
    assert table[1].split() == ["step", "kind", "seconds", "output"]
    assert table[2].split()[:2] == ["1", "report"]
    assert table[2].split()[-1] == str(tmp_path / "page.html")
    again = in_process.saspa("run", job)
    assert again.returncode == 0 and "nothing to do" in again.stderr


_IMAGES = "Array.from(document.images).map(i => [i.complete, i.naturalWidth])"


@pytest.mark.skipif(browser.CHROMIUM is None, reason="no chromium on this machine "
                    "(Debian: apt-get install chromium)")
def test_the_page_renders_in_a_headless_browser(classifier, tmp_path):
    """In Chromium: no console or log error or warning (the page's policy refuses any
    load from elsewhere: a refusal would be logged), and every image decoded.  The same
    check fails a copy of the page with one image broken."""
    model, X, y = classifier
    good = tmp_path / "good.html"
    model.report(X, y, path=good)
    problems, images = browser.load(good.as_uri(), _IMAGES)
    assert problems == []
    assert len(images) == 5 and all(done and width > 100 for done, width in images)
    broken = tmp_path / "broken.html"
    broken.write_text(good.read_text().replace("base64,iVBOR", "base64,XXXX", 1)
                      .replace("</body>", "<img src=\"https://example.org/x.png\"></body>"))
    problems, images = browser.load(broken.as_uri(), _IMAGES)
    assert problems and sum(width == 0 for _, width in images) == 2
