"""The fitting shared by the SASPA estimators: bases, EP, learning, new rows.

A fit produces two things: a :class:`~saspa_dask.models.posterior.FittedPosterior`
(``fitted_posterior_``, what every prediction uses) and a fit report (EP and optimiser
diagnostics, per-row sites: the attributes named in ``_REPORT_ATTRIBUTES`` and
``_REPORT_ARRAYS``).  Predictions, the fitted attributes that describe the posterior
and ``save`` come from :class:`~saspa_dask.models.predictor.PosteriorModel`.
"""

from __future__ import annotations

import inspect
import sys
import time
import warnings
from contextlib import nullcontext
from dataclasses import replace
from numbers import Integral, Real

import dask
import numpy as np
from sklearn.utils._param_validation import (Interval, InvalidParameterError, Options,
                                            StrOptions)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..core.bases import Basis
from ..core.kernels import BASIS_FAMILIES, FOURIER_FAMILIES, blur_covariances
from ..core.likelihoods import powered
from ..engines.chunks import is_lazy
from ..engines.dask_engine import WorkDir
from ..engines.kmeans import kmeans
from ..ep.driver import EPSettings
from ..fitting.basis_parameters import LEARN_BASES, LearntBases, LearntFeatures
from ..fitting.hyperparameters import Hyperparameters, LearntBoundWarning, bound_advice
from ..fitting.costs import SLOW_EVALUATION_SECONDS, choose_blur, evaluation_cost
from ..fitting.optimizer import StopRule
from ..fitting.stochastic import learn_stochastic
from ..fitting.trainer import Trainer
from ..fitting.trainer import fit as fit_hyperparameters
from .new_rows import adf_pass, update_pass
from .posterior import FittedPosterior, stacked
from .predictor import PosteriorModel
from .settings import (APPROXIMATIONS, LEARNING_METHODS, LEGACY_NAMES, EPSchedule, Execution,
                       StochasticLearning, legacy_parameters, settings_of)
from .validation import (check_covariance_memory, check_init_sites, column_names_of,
                         resolve_lengthscale)

__all__ = ["SASPABase", "default_damping"]

_POSITIVE = Interval(Real, 0, None, closed="neither")


# fits of at least this many rows say what they are doing (phase lines on stderr) even
# at verbose=0; verbose=False silences them
LOUD_ROWS = 50_000


def _print_sweep(record):
    problem = f"problem {record['problem'] + 1}  " if "problem" in record else ""
    print(f"[saspa] {problem}sweep {record['sweep']:3d}  change {record['change']:.3e}  "
          f"invalid {record['n_invalid']}  {record['seconds']:.3f}s", file=sys.stderr,
          flush=True)


def _print_hyper(record):
    start = f"start {record['start']}  " if "start" in record else ""
    change = record.get("relative_change")
    change = "" if change is None else f"  change {change:+.2e}"
    print(f"[saspa] hyperparameter {start}iteration {record['iteration']:3d}  "
          f"energy {record['log_evidence']:.8g}{change}  "
          f"gradient {record['projected_gradient']:.2e}  "
          f"evaluations {record['n_evaluations']}  {record['seconds']:.1f}s",
          file=sys.stderr, flush=True)


def default_damping(likelihood):
    """Damping when ``ep.damping`` is None: label noise makes the likelihood
    non-log-concave (negative site precisions, which undamped parallel EP can
    oscillate on), heavy tails likewise."""
    return {"step": 0.8, "noisy_probit": 0.8, "student_t": 0.5}.get(likelihood, 1.0)


def _legacy_attribute(name):
    group, field = LEGACY_NAMES[name]

    def read(self):
        warnings.warn(f"{type(self).__name__}.{name} is read from "
                      + ("approximation" if group == "approximation" else f"{group}.{field}")
                      + " now; the old name will be removed in the next release",
                      FutureWarning, stacklevel=2)
        if group == "approximation":
            return self.approximation == "dtc"
        return getattr(settings_of(group, getattr(self, group)), field)

    return property(read, doc=f"Deprecated: ``{group}`` ({field}).")


# a later learning stage that gains less energy than this per row ends the stages
STAGE_GAIN_PER_ROW = 1e-3


def _sites_at(sites, rows):
    """Per-problem (tau, nu) restricted to ``rows`` (None stays None)."""
    return None if sites is None else [(t[rows], v[rows]) for t, v in sites]


def _sites_on_all(outcome, rows, n_samples, sites):
    """Sites on all rows: the stage's fitted ones on its rows, the given ``sites`` (or
    zero: no information yet) elsewhere."""
    out = []
    for k, result in enumerate(outcome.results):
        tau, nu = ((np.zeros(n_samples), np.zeros(n_samples)) if sites is None
                   else (np.array(s, dtype=np.float64) for s in sites[k]))
        tau[rows], nu[rows] = result.tau, result.nu
        out.append((tau, nu))
    return out


def _stage_record(outcome, n_rows, where):
    """What ``saspa info`` lists of one learning stage."""
    info = outcome.info
    return {"rows": int(n_rows), "where": where, "n_iterations": info["n_iterations"],
            "stop_reason": info["stop_reason"],
            "log_evidence_start": info["log_evidence_start"],
            "log_evidence_end": info["log_evidence_end"],
            "gain_per_row": (info["log_evidence_end"] - info["log_evidence_start"]) / n_rows,
            "seconds": outcome.trace[-1]["seconds"] if outcome.trace else 0.0}


def _merge_stages(outcome, learnt, stages):
    """The learning report of a fit from its stages, a list of (outcome, rows, where):
    the stage that learnt last gives the info (``learnt``, when the final fit on all
    rows did not learn), with every stage's trace (tagged ``stage``) and record when
    there were several."""
    if learnt is not None:
        outcome.trace, outcome.info = learnt.trace, learnt.info
    if len(stages) > 1:
        outcome.trace = [{**rec, "stage": k} for k, (o, _, _) in enumerate(stages)
                         for rec in o.trace]
        outcome.info = {**outcome.info, "stages": [_stage_record(*s) for s in stages]}


class SASPABase(PosteriorModel):
    """Fitting, fitted state and new rows shared by the SASPA estimators."""

    _parameter_constraints: dict = {
        "n_bases": [Interval(Integral, 1, None, closed="left")],
        "blur": [StrOptions(set(BASIS_FAMILIES) | {"auto"})],
        "approximation": [StrOptions(set(APPROXIMATIONS))],
        "alpha": [Interval(Real, 0, 1, closed="right")],
        "lengthscale": ["array-like", _POSITIVE, None],
        "signal_variance": [_POSITIVE, None],
        "bases": [Basis, None],
        "jitter": [_POSITIVE],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "optimize_hyperparameters": ["boolean"],
        "max_hyper_iter": [Interval(Integral, 1, None, closed="left")],
        "hyper_tol": [Interval(Real, 0, None, closed="left")],
        "max_fit_time": [Interval(Real, 0, None, closed="neither"), None],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
        "learn_blur_scale": ["boolean"],
        "learn_bases": [StrOptions(set(LEARN_BASES) | {"auto"}), Options(bool, {False}),
                        None],
        "hyper_subsample": [Interval(Integral, 1, None, closed="left"), tuple, list, None],
        "learning": [StrOptions(set(LEARNING_METHODS))],
        "stochastic": [StochasticLearning, dict, None],
        "ep": [EPSchedule, dict, None],
        "execution": [Execution, dict, None],
    }

    # the fit report: diagnostics a model store keeps beside the fitted posterior
    _REPORT_ATTRIBUTES = (
        "n_sweeps_", "converged_", "log_evidence_", "n_invalid_cavities_",
        "n_skipped_updates_", "n_damping_halvings_", "n_damping_reductions_",
        "n_anderson_steps_", "n_anderson_restarts_", "coarse_start_", "history_",
        "damping_", "blur_", "blur_scale_", "cost_estimate_", "hyperparameter_trace_",
        "hyperparameter_info_", "timings_", "kmeans_info_", "data_fingerprint_")
    _REPORT_ARRAYS = ("sites_tau_", "sites_nu_")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # ``**legacy`` (the old flat names, for one release) is not a parameter: hidden
        # from the signature scikit-learn introspects (get_params, clone, its checks)
        init = cls.__dict__.get("__init__")
        if init is not None:
            signature = inspect.signature(init)
            init.__signature__ = signature.replace(parameters=[
                p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD])

    def _folded(self, legacy, given, stacklevel):
        """``ep``, ``execution`` and ``approximation`` (``given`` ones first, else the
        current ones) with the old flat names in ``legacy`` folded in, with a
        FutureWarning."""
        current = {name: given.get(name, getattr(self, name))
                   for name in ("ep", "execution", "approximation")}
        return legacy_parameters(current, legacy, owner=type(self).__name__,
                                 stacklevel=stacklevel)

    def _fold_legacy(self, legacy):
        """``__init__``'s old keyword arguments (see :meth:`_folded`)."""
        if legacy:
            for name, value in self._folded(legacy, {}, stacklevel=5).items():
                setattr(self, name, value)

    def set_params(self, **params):
        """Set parameters (scikit-learn's ``set_params``); the old flat names of the
        grouped settings are accepted for one release, with a FutureWarning."""
        legacy = {k: params.pop(k) for k in list(params) if k in LEGACY_NAMES}
        if legacy:
            params.update(self._folded(legacy, params, stacklevel=4))
        return super().set_params(**params)

    @property
    def _ep(self):
        return self._settings("ep")

    @property
    def _execution(self):
        return self._settings("execution")

    def _validate_params(self):
        """scikit-learn's parameter checks, then the grouped settings' fields (before
        any work: the data's checks and K-means come after)."""
        super()._validate_params()
        for group in ("ep", "execution", "stochastic"):
            self._settings(group)

    def _settings(self, group):
        """A grouped setting, checked; errors as scikit-learn's for its parameters."""
        try:
            return settings_of(group, getattr(self, group))
        except ValueError as err:
            raise InvalidParameterError(f"The {group!r} parameter of {type(self).__name__}: "
                                        f"{err}") from None

    @property
    def _prediction_rows(self):
        return self._execution.block_rows

    # -- fitting -------------------------------------------------------------------

    def _reset(self):
        """Forget every fitted attribute (a refit starts from nothing)."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    def _resolve_bases(self, X, lazy, column_std):
        n_samples, d = X.shape
        check_covariance_memory(self.n_bases if self.bases is None
                                else self.bases.means.shape[0], d, self.blur_)
        if self.bases is not None:
            if self.bases.means.shape[1] != d:
                raise ValueError(f"bases have {self.bases.means.shape[1]} features but X "
                                 f"has {d}")
            if self.bases.is_fourier:
                return self._given_features()
            basis = self.bases
        elif self.blur_ == "fourier-global":
            return self._global_features(X, lazy, column_std)
        else:
            if self.n_bases > n_samples:
                raise ValueError(f"n_bases={self.n_bases} exceeds n_samples={n_samples}: "
                                 "use at most one basis per training row")
            basis, self.kmeans_info_ = kmeans(X, self.n_bases, random_state=self.random_state)
            if basis.n_bases < self.n_bases:
                warnings.warn(f"K-means found {basis.n_bases} distinct clusters for "
                              f"n_bases={self.n_bases} (too few distinct points); using "
                              "those", UserWarning, stacklevel=4)
        covs = blur_covariances(basis.covs, self.blur_)
        if self.blur_ not in FOURIER_FAMILIES:
            return Basis(basis.means, covs)
        return self._spectral_start(basis.means, covs, column_std)

    def _spectral_start(self, centres, covs, column_std):
        """Frequency features as FIFGP starts them: frequencies drawn from the
        kernel's spectral density at the starting lengthscales, phases uniform."""
        M, d = centres.shape
        rng = check_random_state(self.random_state)
        lengthscale = resolve_lengthscale(self.lengthscale, d, column_std)
        frequencies = rng.normal(size=(M, d)) / lengthscale
        return Basis(centres, covs, frequencies, rng.uniform(0, 2 * np.pi, M))

    def _global_features(self, X, lazy, column_std):
        """FIFGP's start: every feature centred on the inputs' mean, with one window
        as wide as the inputs' spread (the window is the features' reach: it must
        cover the data), frequencies as :meth:`_spectral_start`."""
        d = X.shape[1]
        centre = np.asarray(X.mean(axis=0).compute() if lazy else X.mean(axis=0),
                            dtype=np.float64)
        spread = np.asarray(column_std, dtype=np.float64) ** 2
        # a constant input has no spread: its window is the starting lengthscale
        lengthscale = resolve_lengthscale(self.lengthscale, d, column_std)
        window = np.where(spread > 0, spread, lengthscale ** 2)
        covs = np.repeat(np.diag(window)[None], self.n_bases, axis=0)
        return self._spectral_start(np.repeat(centre[None], self.n_bases, axis=0), covs,
                                    column_std)

    def _given_features(self):
        """``bases`` with frequencies, checked against ``blur``."""
        bases = self.bases
        if self.blur_ not in FOURIER_FAMILIES:
            raise ValueError("bases with frequencies are frequency features: use "
                             "blur='fourier' or blur='fourier-global'")
        if self.blur_ == "fourier-global" and np.ptp(bases.means, axis=0).max() > 0:
            raise ValueError("blur='fourier-global' features share one centre, but the "
                             "given bases' means differ: use blur='fourier'")
        return bases

    def _learn_bases(self):
        """What ``learn_bases`` means for this fit: ``"auto"`` learns the means of
        K-means bases whenever the hyperparameters are learnt (better held-out NLPD in
        every measured case, ``benchmarks/RESULTS.md``), and keeps given ``bases`` as
        they are."""
        if self.learn_bases == "auto":
            learn = self.optimize_hyperparameters and self.bases is None
            return "means" if learn else False
        return self.learn_bases or False

    def _start_hyperparameters(self, X, likelihood, signal_variance, column_std, basis,
                               centre=None):
        """The optimiser's starting point; it says what is learnt.  ``centre`` is
        (signal variance, likelihood) as the data alone would start them: with the
        data-driven lengthscales, the box the values are learnt in is centred there."""
        learn = self._learn_bases()
        if learn and not self.optimize_hyperparameters:
            raise ValueError(f"learn_bases={learn!r} needs optimize_hyperparameters=True "
                             "(the bases are learnt by the EP evidence)")
        if learn == "means+blur" and self.learn_blur_scale:
            raise ValueError("learn_blur_scale=True is redundant with "
                             "learn_bases='means+blur' (each basis learns its own blur)")
        lengthscale = resolve_lengthscale(self.lengthscale, X.shape[1], column_std)
        bases = None
        if learn and basis.is_fourier:
            bases = LearntFeatures(basis.means, basis.frequencies, basis.phases,
                                   basis.window_variance, learn == "means+blur", lengthscale,
                                   centres_learnt=self.blur_ == "fourier")
        elif learn:
            bases = LearntBases(basis.means, basis.covs, self.blur_, learn == "means+blur",
                                lengthscale)
        middle = None
        if centre is not None:
            middle = Hyperparameters(resolve_lengthscale(None, X.shape[1], column_std),
                                     float(centre[0]), centre[1].hyperparameters())
        return Hyperparameters(
            lengthscale, float(signal_variance),
            likelihood.hyperparameters() if self.optimize_hyperparameters else {},
            learn_blur_scale=bool(self.learn_blur_scale) and self.blur_ != "delta",
            bases=bases, centre=middle)

    def _learning_stages(self, n_samples, lazy=False):
        """The subsample stages of learning: a list of sorted row-index arrays, each
        containing the last (prefixes of one seeded permutation), and whether learning
        then continues on all rows.  Dask data no larger than a stage's size is
        learnt on in memory on the driver (one stage of every row): an evaluation there
        costs a fraction of a distributed one."""
        if not self.optimize_hyperparameters:
            return [], False
        sizes = self.hyper_subsample
        sizes = [sizes] if sizes is None or isinstance(sizes, Integral) else list(sizes)
        for k, size in enumerate(sizes):
            if size is None and k < len(sizes) - 1 or size is not None and (
                    not isinstance(size, Integral) or size < 1):
                raise InvalidParameterError(
                    f"hyper_subsample must be row counts, increasing, optionally ending "
                    f"with None (all rows); got {self.hyper_subsample!r}")
        stages = []
        for size in sizes:
            if size is not None and size >= n_samples and lazy:
                return self._stage_rows(stages + [n_samples], n_samples), False
            if size is None or size >= n_samples:
                return self._stage_rows(stages, n_samples), True
            if stages and size <= stages[-1]:
                raise InvalidParameterError(f"hyper_subsample stages must increase; got "
                                            f"{self.hyper_subsample!r}")
            stages.append(int(size))
        return self._stage_rows(stages, n_samples), False

    def _stage_rows(self, sizes, n_samples):
        if not sizes:
            return []
        # RandomState.choice without replacement is a permutation's prefix: one
        # permutation gives every stage, each containing the last
        order = check_random_state(self.random_state).permutation(n_samples)
        return [np.sort(order[:size]) for size in sizes]

    def _stages_end(self, stages, say):
        """After a stage: True when later stages are not worth running (this stage's
        energy gain per row was below :data:`STAGE_GAIN_PER_ROW`, or the time budget
        is spent)."""
        last = _stage_record(*stages[-1])
        if last["stop_reason"] == "time":
            say("learning: the time budget is spent; no further stages")
            return True
        if len(stages) > 1 and last["gain_per_row"] < STAGE_GAIN_PER_ROW:
            say(f"learning: the stage on {last['rows']} rows gained "
                f"{last['gain_per_row']:.2g} nats per row (< {STAGE_GAIN_PER_ROW:g}); no "
                "further stages")
            return True
        return False

    def _fit_posterior(self, X, targets, likelihood, signal_variance, damping,
                            column_std, *, progress=None, init_sites=None, labels=None,
                            offset=0.0, classes=None, column_names=None,
                            data_fingerprint=None, centre=None):
        """Bases, whitening, EP (in memory or on Dask) and, if asked, evidence
        maximisation; sets ``fitted_posterior_`` and the fit report.

        ``labels`` (one-vs-rest) makes one EP problem per class on shared blocks.
        ``column_names`` and ``data_fingerprint`` describe where X came from (a data
        store's columns and content): the posterior keeps the names (scoring matches
        columns by them) and the report the fingerprint.  With
        ``hyper_subsample`` rows fewer than the data, the evidence is maximised on that
        subsample (in memory) and EP then runs on all rows at the learnt values.
        """
        lazy = is_lazy(X)
        say = self._phase_printer(X.shape[0])
        start = time.perf_counter()
        say(f"{type(self).__name__}: {X.shape[0]} rows x {X.shape[1]} inputs"
            f"{', one-vs-rest over ' + str(len(labels)) + ' classes' if labels else ''}; "
            + ("bases given" if self.bases is not None else
               f"K-means for {self.n_bases} bases"))
        self.blur_ = choose_blur(self.blur, X.shape[1])
        basis = self._resolve_bases(X, lazy, column_std)
        start_hyper = self._start_hyperparameters(X, likelihood, signal_variance, column_std,
                                                  basis, centre)
        self.timings_ = {"bases": time.perf_counter() - start}
        km = getattr(self, "kmeans_info_", None)
        say(f"bases ready ({self.timings_['bases']:.1f}s"
            + (f", K-means converged {km.get('converged')}" if km else "") + ")")
        self.damping_ = float(damping)
        likelihood = powered(likelihood, float(self.alpha))  # EP's power: 1 is EP
        execution = self._execution
        sites = check_init_sites(init_sites, X.shape[0], 1 if labels is None else len(labels))
        trainer_for = self._trainer_factory(labels, basis, progress)

        rule = self._stop_rule(start)  # the budget counts from the fit's start
        positions = self._restart_positions(start_hyper)

        def fit(trainer, hyper, sites, optimize, restarts=True):
            return fit_hyperparameters(
                trainer, likelihood, hyper, optimize_hyperparameters=optimize, rule=rule,
                init_sites=sites, n_restarts=int(self.n_restarts_optimizer) if restarts else 0,
                positions=positions, callback=_print_hyper if say.loud else None)

        stages, learn_on_all = self._learning_stages(X.shape[0], lazy)
        if self.optimize_hyperparameters:
            self._announce_cost(stages[0].size if stages else X.shape[0], basis, say)
        start = time.perf_counter()
        if self.learning == "stochastic" and self.optimize_hyperparameters:
            stages, learn_on_all = [], False  # every row learnt on: EP polishes after
        learnt, rows, stage_sites, done, ended = self._learn(
            X, targets, stages, start_hyper, sites, trainer_for, fit, say,
            likelihood, rule)
        if learnt is not None:
            start_hyper = learnt.hyper
            self.timings_["hyperparameters"] = time.perf_counter() - start
            learn_on_all = learn_on_all and not ended
        learn_here = bool(self.optimize_hyperparameters) and learn_on_all
        say(f"EP on {X.shape[0]} rows" + (", learning hyperparameters" if learn_here else ""))
        # Dask inputs keep their sites in a scratch store (removed afterwards)
        with WorkDir(execution.work_dir) if lazy else nullcontext() as work_dir:
            covered = bool(stages) and stages[-1].size == X.shape[0]
            outcome = fit(trainer_for(X, targets, work_dir), start_hyper,
                          stage_sites if learn_here or covered else sites, learn_here,
                          restarts=not stages)
        self.timings_["ep"] = time.perf_counter() - start
        if learn_here:
            done.append((outcome, X.shape[0], "workers" if lazy else "driver (in memory)"))
            rows = None
        _merge_stages(outcome, learnt if not learn_here else None, done)
        self._set_fitted(outcome, likelihood, offset, classes, X.shape[0], rows,
                         column_names)
        self.data_fingerprint_ = data_fingerprint
        self._say_done(say)
        return self

    def _say_done(self, say):
        """The fit's last phase lines: how learning stopped, and EP."""
        info = self.hyperparameter_info_
        if "stop_reason" in info:
            say(f"learning: {info['message']} after {info['n_iterations']} iterations "
                f"(tol {info['tol']:g}), energy {info['log_evidence_start']:.8g} -> "
                f"{info['log_evidence_end']:.8g}")
        say(f"done: {self.n_sweeps_} sweeps, converged {self.converged_}, "
            f"{self.timings_['bases'] + self.timings_['ep']:.1f}s")

    def _trainer_factory(self, labels, basis, progress):
        """``trainer_for(X, targets, work_dir)``: a Trainer of these bases and
        settings on some rows."""
        settings, execution = self._engine_settings(self.damping_), self._execution

        def trainer_for(X, targets, work_dir):
            return Trainer(X, targets, labels, basis.means, basis.covs, settings,
                           frequencies=basis.frequencies, phases=basis.phases,
                           jitter=self.jitter, block_rows=execution.block_rows,
                           cache=execution.cache, work_dir=work_dir,
                           callback=progress or (_print_sweep if self.verbose else None),
                           projected_only=self.approximation != "fitc")
        return trainer_for

    def _learn_in_stages(self, X, targets, stages, hyper, sites, trainer_for, fit, say):
        """Learn on each subsample stage in memory on the driver, each warm-started from
        the last (its values, and its sites on its rows).  Returns the last stage's
        outcome (None without stages), its rows, the sites on all rows, the stages run
        as (outcome, rows, where), and whether a stage ended the stages early."""
        learnt, rows, done = None, None, []
        for k, rows in enumerate(stages):
            # one pass over the chunks for both (lazy inputs); NumPy indexes in memory
            X_sub, y_sub = (dask.compute(X[rows], targets[rows]) if is_lazy(X)
                            else (X[rows], targets[rows]))
            what = "all" if rows.size == X.shape[0] else "a subsample of"
            say(f"learning hyperparameters{' and bases' if self._learn_bases() else ''} on "
                f"{what} {rows.size} rows, in memory on the driver "
                f"({self._stop_description()})")
            learnt = fit(trainer_for(X_sub, y_sub, None), hyper, _sites_at(sites, rows),
                         True, restarts=k == 0)
            hyper = learnt.hyper
            sites = _sites_on_all(learnt, rows, X.shape[0], sites)
            done.append((learnt, rows.size, "driver (in memory)"))
            if self._stages_end(done, say):
                return learnt, rows, sites, done, True
        return learnt, rows, sites, done, False

    def _learn(self, X, targets, stages, hyper, sites, trainer_for, fit, say, likelihood,
               rule):
        """Learning before EP on all rows: stochastic on every row, or full-batch on
        the subsample stages (see :meth:`_learn_in_stages` for what it returns)."""
        if self.learning == "stochastic" and self.optimize_hyperparameters:
            return self._learn_stochastically(X, targets, hyper, likelihood, trainer_for,
                                              rule, say)
        return self._learn_in_stages(X, targets, stages, hyper, sites, trainer_for, fit, say)

    def _learn_stochastically(self, X, targets, hyper, likelihood, trainer_for, rule, say):
        """Learn on every row by stochastic EP (:mod:`saspa_dask.fitting.stochastic`);
        returns what :meth:`_learn_in_stages` does.  EP on all rows then polishes."""
        schedule = self._settings("stochastic")
        say(f"learning stochastically on all {X.shape[0]} rows (minibatches of "
            f"{schedule.batch_rows}, learning rate {schedule.learning_rate:g}, at most "
            f"{schedule.max_epochs:g} epochs{self._budget_text()})")

        def tell(record):
            say(f"epoch {record['epoch']}: energy {record['energy_per_row']:.6g} per row "
                f"(minibatch estimate), {record['steps']} steps, {record['seconds']:.1f}s")

        seed = check_random_state(self.random_state).randint(2**31 - 1)
        # on Dask the minibatches are read chunk by chunk; no site store is needed
        learnt = learn_stochastic(trainer_for(X, targets, None), likelihood, hyper, schedule,
                                  seed=seed, deadline=rule.deadline, callback=tell)
        return learnt, None, None, [], learnt.info["stop_reason"] == "time"

    def _budget_text(self):
        return "" if self.max_fit_time is None else f", budget {self.max_fit_time:g}s"

    def _restart_positions(self, start):
        """Restart k's learnt bases: K-means on the learning rows with the k-th of a
        sequence of seeds drawn from ``random_state`` (None when the bases are not
        learnt, or are frequency features)."""
        bases = start.bases
        if not isinstance(bases, LearntBases) or not self.n_restarts_optimizer:
            return None
        seeds = check_random_state(self.random_state).randint(
            2**31 - 1, size=int(self.n_restarts_optimizer))

        def positions(k, X):
            found, _ = kmeans(X, bases.means.shape[0], random_state=int(seeds[k - 1]))
            if found.n_bases != bases.means.shape[0]:  # too few distinct points
                return bases
            return replace(bases, means=found.means,
                           covs=blur_covariances(found.covs, self.blur_))
        return positions

    def _announce_cost(self, n_rows, basis, say):
        """Say what one optimiser evaluation will cost, and warn when that is slow."""
        M, d = basis.means.shape
        learn = self._learn_bases()
        self.cost_estimate_ = evaluation_cost(n_rows, M, d, self.blur_, learn)
        seconds = self.cost_estimate_["seconds_per_evaluation"]
        what = (f"{M} bases x {d} inputs, blur {self.blur_}"
                + (" (auto)" if self.blur == "auto" else "")
                + f", bases learnt: {learn or 'no'}, {n_rows} rows")
        say(f"learning: about {seconds:.2g}s per optimiser evaluation on one core ({what})")
        if seconds > SLOW_EVALUATION_SECONDS:
            warnings.warn(
                f"learning is expected to take about {seconds:.0f}s per optimiser "
                f"evaluation ({what}), and a fit needs tens to hundreds of them; for "
                "less, use blur='diagonal' (or 'auto'), fewer bases, a smaller "
                "hyper_subsample, or max_fit_time", UserWarning, stacklevel=5)

    def _stop_rule(self, fit_start):
        """When the optimiser stops; the time budget counts from ``fit_start``."""
        budget = self.max_fit_time
        return StopRule(tol=float(self.hyper_tol), max_iter=int(self.max_hyper_iter),
                        deadline=None if budget is None else fit_start + float(budget))

    def _stop_description(self):
        budget = "" if self.max_fit_time is None else f", budget {self.max_fit_time:g}s"
        return f"tol {self.hyper_tol:g}, at most {self.max_hyper_iter} iterations{budget}"

    def _engine_settings(self, damping):
        """The EP driver's settings: ``ep`` with the damping resolved."""
        ep = self._ep
        return EPSettings(ep.mode, damping, ep.max_sweeps, ep.tol,
                          coarse_start=ep.coarse_start, anderson_memory=ep.anderson_memory)

    def _phase_printer(self, n_samples):
        """Prints a phase line to stderr when ``verbose`` is on, or for fits of at
        least ``LOUD_ROWS`` rows unless ``verbose=False``."""
        loud = bool(self.verbose) or (self.verbose is not False and n_samples >= LOUD_ROWS)

        def say(message):
            if loud:
                print(f"[saspa] {message}", file=sys.stderr, flush=True)

        say.loud = loud  # optimiser iterations are reported with the phases
        return say

    def _set_fitted(self, outcome, likelihood, offset, classes, n_samples, rows,
                    column_names):
        hyper = outcome.hyper
        if outcome.jitter > self.jitter * hyper.signal_variance * (1 + 1e-12):
            warnings.warn(f"basis covariance needed jitter {outcome.jitter:.3g} (asked "
                          f"{self.jitter * hyper.signal_variance:.3g}): bases nearly coincide",
                          UserWarning, stacklevel=5)
        fitted_likelihood = likelihood.with_hyperparameters(hyper.likelihood)
        self.fitted_posterior_ = FittedPosterior(
            outcome.basis.means, outcome.basis.covs, hyper.lengthscale, hyper.signal_variance,
            outcome.jitter, outcome.L, [r.posterior for r in outcome.results],
            fitted_likelihood.name, fitted_likelihood.params(), offset=offset,
            classes=classes, feature_names=column_names_of(self, column_names),
            frequencies=outcome.basis.frequencies, phases=outcome.basis.phases,
            projected_prediction=self.approximation == "sor")
        self.blur_scale_ = hyper.blur_scale
        self.hyperparameter_trace_ = outcome.trace or []
        info = dict(outcome.info or {})
        if self.optimize_hyperparameters:
            info.update(learn_bases=self._learn_bases(),
                        n_rows_learnt=int(n_samples if rows is None else rows.size))
        self.hyperparameter_info_ = info
        if info.get("at_bounds"):
            warnings.warn(bound_advice(info["at_bounds"]), LearntBoundWarning, stacklevel=5)
        self._set_report(outcome.results)

    def _set_report(self, results):
        def total(name):
            return sum(getattr(r, name) for r in results)

        self.sites_tau_ = stacked([r.tau for r in results])
        self.sites_nu_ = stacked([r.nu for r in results])
        self.n_sweeps_ = max(r.n_sweeps for r in results)
        self.converged_ = all(r.converged for r in results)
        self.log_evidence_ = float(total("log_evidence"))
        for name in ("n_invalid_cavities", "n_skipped_updates", "n_damping_halvings",
                     "n_damping_reductions", "n_anderson_steps", "n_anderson_restarts"):
            setattr(self, f"{name}_", int(total(name)))
        one = len(results) == 1
        self.coarse_start_ = [level if one else {**level, "problem": k}
                              for k, r in enumerate(results) for level in r.coarse_start]
        self.history_ = results[0].history if one else [
            {**rec, "problem": k} for k, r in enumerate(results) for rec in r.history]

    # -- new rows ------------------------------------------------------------------

    def warm_start_sites(self, X_new, y_new, *, new_rows="update"):
        """Sites to warm-start a refit on the training rows followed by ``X_new``.

        The training rows keep their fitted sites.  The new rows' sites remove the
        first, largest sweep of a start from zero sites; ``new_rows`` says how:

        - ``"update"``: one EP site update of every new row against the current
          posterior, all at once (a parallel EP step restricted to the new rows; costs
          a sweep over the new rows only);
        - ``"adf"``: one assumed-density-filtering pass, as ``partial_fit`` gives them
          (each row also sees the rows before it; sequential, so slower per row);
        - ``"empty"``: zero sites.

        The model is not changed.  Pass the result as ``init_sites`` to ``fit`` on all
        rows, with this model's bases and hyperparameters, as ``saspa retrain`` does.

        Parameters
        ----------
        X_new : array-like of shape (n_new, n_features)
            NumPy, dask or zarr; lazy inputs are read one row chunk at a time.
        y_new : array-like of shape (n_new,)
        new_rows : {"update", "adf", "empty"}, default="update"

        Returns
        -------
        tau, nu : ndarray of shape (n_train + n_new,), or (n_problems, n_train + n_new)
            for one-vs-rest.  Invalid cavities and skipped updates met on the new rows
            are reported as a warning (their sites stay zero).
        """
        check_is_fitted(self, "fitted_posterior_")
        if new_rows not in ("update", "adf", "empty"):
            raise ValueError(f"new_rows must be one of ('update', 'adf', 'empty'), got "
                             f"{new_rows!r}")
        X_new, targets, labels = self._new_rows(X_new, y_new)
        fitted, n_skipped = self.fitted_posterior_, 0
        if new_rows == "update":
            tau, nu, n_invalid = update_pass(fitted, X_new, targets, labels,
                                             self._execution.block_rows, self.alpha)
        elif new_rows == "adf":
            _, tau, nu, n_invalid, n_skipped = adf_pass(fitted, X_new, targets, labels,
                                                        self._execution.block_rows,
                                                        self.alpha)
        else:
            tau = nu = np.zeros(self.sites_tau_.shape[:-1] + (X_new.shape[0],))
            n_invalid = 0
        if n_invalid or n_skipped:
            warnings.warn(f"new rows' starting sites ({new_rows}): {n_invalid} invalid "
                          f"cavities, {n_skipped} skipped updates", UserWarning, stacklevel=2)
        return (np.concatenate([self.sites_tau_, tau], axis=-1),
                np.concatenate([self.sites_nu_, nu], axis=-1))

    def _partial_fit_rows(self, X, y):
        """One assumed-density-filtering pass over new rows (see ``partial_fit``)."""
        X, targets, labels = self._new_rows(X, y)
        posteriors, tau, nu, n_invalid, n_skipped = adf_pass(
            self.fitted_posterior_, X, targets, labels, self._execution.block_rows, self.alpha)
        self.sites_tau_ = np.concatenate([self.sites_tau_, tau], axis=-1)
        self.sites_nu_ = np.concatenate([self.sites_nu_, nu], axis=-1)
        self.n_invalid_cavities_ += n_invalid
        self.n_skipped_updates_ += n_skipped
        self.history_ = [*self.history_, {"partial_fit_rows": int(X.shape[0]),
                                          "n_invalid": n_invalid, "n_skipped": n_skipped}]
        self.fitted_posterior_ = replace(self.fitted_posterior_, posteriors=tuple(posteriors))
        # the evidence needs every row's cavity; partial_fit does not revisit old rows
        self.log_evidence_ = float("nan")
        return self


# the old flat names of the grouped settings stay readable for one release
for _name in LEGACY_NAMES:
    setattr(SASPABase, _name, _legacy_attribute(_name))
del _name
