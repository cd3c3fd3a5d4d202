"""A fit as a thing of the fitting layer: what a SASPA fit does, in order.

A :class:`FitPlan` holds every choice of a fit (basis start, hyperparameter start,
learning stages, stop rule, EP schedule, execution); :meth:`FitPlan.run` takes the
training rows, their EP targets and the likelihood and returns a :class:`FitResult`:
the :class:`~saspa_dask.fitting.posterior.FittedPosterior` every prediction uses and
the fit report (EP and optimiser diagnostics, per-row sites).  The estimators build a
plan from their parameters and keep the result; they do no fitting of their own.

The phases: bases (given, K-means or frequency features) and the starting
hyperparameters (:class:`~saspa_dask.fitting.fit_run.FitRun`), then those
:meth:`FitPlan.phases` lists (:mod:`saspa_dask.fitting.phases`): learning (none,
full-batch on subsample stages in memory, or stochastic on every row), then EP on all
rows at the learnt values (learning there too when the stages end on every row) or
the learning sample's model.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..core.blur_families import blur_family
from ..core.likelihoods import powered
from ..ep.approximation import approximation_named
from ..ep.schedule import EPSchedule
from ..parameters import LEARNING_STARTS
from .fit_run import FitRun
from .held_out import HeldOutWatch
from .phases import FinalModel, FixedValues, LearningOnMinibatches, StagedLearning
from .input_groups import additive_terms_of, feature_groups_of
from .learning_advice import (LearningStoppedWarning, LearntBoundWarning, bound_advice,
                              by_input_name, learning_stopped_advice)
from .posterior import FittedPosterior, stacked
from .settings import Execution, StochasticLearning
from .stages import check_init_sites, stage_sizes

__all__ = ["FitPlan", "FitResult", "REPORT_ATTRIBUTES", "REPORT_ARRAYS"]

# the fit report: diagnostics a model store keeps beside the fitted posterior (the
# estimators' attributes of these names)
REPORT_ATTRIBUTES = (
    "n_sweeps_", "converged_", "ep_stop_reason_", "log_evidence_", "n_invalid_cavities_",
    "n_skipped_updates_", "n_damping_halvings_", "n_damping_reductions_",
    "n_anderson_steps_", "n_anderson_restarts_", "coarse_start_", "history_",
    "damping_", "blur_", "blur_scale_", "cost_estimate_", "hyperparameter_trace_",
    "hyperparameter_info_", "timings_", "kmeans_info_", "data_fingerprint_",
    "held_out_trace_")
REPORT_ARRAYS = ("sites_tau_", "sites_nu_")

_EP_COUNTS = ("n_invalid_cavities", "n_skipped_updates", "n_damping_halvings",
              "n_damping_reductions", "n_anderson_steps", "n_anderson_restarts")


@dataclass
class FitResult:
    """What :meth:`FitPlan.run` produced: the fitted posterior and the fit report
    (attribute name -> value, the names of :data:`REPORT_ATTRIBUTES` and
    :data:`REPORT_ARRAYS` that the fit set)."""

    posterior: FittedPosterior
    report: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FitPlan:
    """Every choice of a SASPA fit; the estimators' parameters of the same names
    (see :class:`~saspa_dask.SASPAClassifier`) say what each means.

    ``blur`` may be ``"auto"`` (chosen by input width when the plan runs),
    ``learn_bases`` ``"auto"`` (see :attr:`learnt_bases`); ``ep.damping`` must be
    resolved (a number: :meth:`EPSchedule.with_damping`).  ``owner`` names the
    estimator in messages.
    """

    owner: str = "SASPA"
    n_bases: int = 32
    blur: str = "auto"
    kernel: str = "se"
    feature_groups: object = None
    additive_groups: object = None
    term_weights: object = None
    bases: Basis | None = None
    lengthscale: object = None
    jitter: float = 1e-6
    alpha: float = 1.0
    approximation: str = "fitc"
    random_state: object = None
    optimize_hyperparameters: bool = True
    learn_bases: object = "auto"
    learn_blur_scale: bool = False
    learn_offset: bool = False
    log_target: bool = False
    exact_start: object = False
    learning_start: str = "data"
    #: not a parameter: (iteration, energy per row) where learning stops if behind
    #: (``learning_start="race"``: the other start's energy; ``optimizer.StopRule``)
    race_checkpoint: tuple | None = None
    min_noise_variance: float | None = None
    n_restarts_optimizer: int = 0
    hyper_subsample: object = None
    learning: str = "full-batch"
    stochastic: StochasticLearning = field(default_factory=StochasticLearning)
    hyper_tol: float = 1e-4
    max_hyper_iter: int = 500
    max_fit_time: float | None = None
    ep: EPSchedule = field(default_factory=EPSchedule)
    execution: Execution = field(default_factory=Execution)
    verbose: object = 0

    @property
    def learnt_bases(self):
        """What ``learn_bases`` means for this fit: ``"auto"`` learns the means of
        K-means bases whenever the hyperparameters are learnt (better held-out NLPD
        in every measured case, ``benchmarks/RESULTS.md``), and keeps given ``bases``
        as they are."""
        if self.learn_bases == "auto":
            learn = self.optimize_hyperparameters and self.bases is None
            return "means" if learn else False
        return self.learn_bases or False

    @property
    def stochastic_learning(self):
        return self.learning == "stochastic" and bool(self.optimize_hyperparameters)

    def phases(self):
        """The fit's phases after its start (bases and starting values), in order
        (:mod:`saspa_dask.fitting.phases`): learning (none, staged full-batch, or
        stochastic), then the model (EP on all rows, or the learning sample's)."""
        if not self.optimize_hyperparameters:
            learning = FixedValues()
        elif self.stochastic_learning:
            learning = LearningOnMinibatches()
        else:
            learning = StagedLearning()
        return [learning, FinalModel()]

    def validate(self, likelihood=None, n_problems=None):
        """Refuse a plan whose choices do not go together, before any data is read:
        the estimators call this from ``_validate_params`` (so ``fit`` in Python,
        ``saspa train`` and job files all refuse before any work), and :meth:`run`
        again with what only the data says (``n_problems``).

        Parameters
        ----------
        likelihood : Likelihood class or object, optional
            Its ``learnable`` names decide whether ``min_noise_variance`` applies.
        n_problems : int, optional
            EP problems of the fit (one per class for one-vs-rest), when known.

        Raises
        ------
        ValueError
            Naming the parameters that do not go together.
        """
        stage_sizes(self.hyper_subsample)
        learn, blur = self.learnt_bases, self.blur
        family = None if blur == "auto" else blur_family(blur)  # auto: blurred points
        frequency = family is not None and family.frequency
        if learn and not self.optimize_hyperparameters:
            raise ValueError(f"learn_bases={learn!r} needs optimize_hyperparameters=True "
                             "(the bases are learnt by the EP evidence)")
        if learn == "means+blur" and self.learn_blur_scale:
            raise ValueError("learn_blur_scale=True is redundant with "
                             "learn_bases='means+blur' (each basis learns its own blur)")
        if self.kernel != "se" and frequency:
            raise ValueError(f"kernel={self.kernel!r}: frequency features "
                             f"(blur={blur!r}) are built on the SE kernel")
        if learn == "means+blur" and family is not None and not family.blurred:
            raise ValueError(f"learn_bases='means+blur' needs a blur family with "
                             f"covariances; blur={blur!r} has none (learn_bases='means')")
        if self.additive_groups is not None and frequency:
            raise ValueError("additive_groups sums kernels over blurred bases: not with "
                             f"frequency features (blur={blur!r})")
        if self.term_weights is not None and self.additive_groups is None:
            raise ValueError("term_weights are the weights of additive_groups' terms: "
                             "set additive_groups too")
        if self.min_noise_variance is not None and likelihood is not None and \
                "noise_variance" not in likelihood.learnable:
            raise ValueError("min_noise_variance is a floor of the gaussian likelihood's "
                             f"noise variance; the {likelihood.name} likelihood has none")
        self._validate_learning_start(likelihood, family)
        if self.learn_offset and n_problems is not None and n_problems > 1:
            raise ValueError("learn_offset needs one EP problem (a regression or a "
                             "binary classification), not one per class")

    def _validate_learning_start(self, likelihood, family):
        """One of :data:`LEARNING_STARTS`; one that asks for the variational start
        (not "data", nor "auto", which falls back to "data") only where
        :meth:`_start_refusal` has no objection (``family`` None: blur "auto", which
        that start resolves to delta)."""
        start = self.learning_start
        if start not in LEARNING_STARTS:
            raise ValueError(f"learning_start={start!r} is none of "
                             f"{', '.join(LEARNING_STARTS)}")
        refusal = None if start in ("auto", "data") else self._start_refusal(likelihood,
                                                                           family)
        if refusal:
            raise ValueError(refusal.format(start=repr(start)))

    def _start_refusal(self, likelihood, family):
        """Why learning cannot start other than from the data ("{start}" stands for
        the asked start), or None."""
        why = None
        if not self.optimize_hyperparameters:
            why = "learning (optimize_hyperparameters=True)"
        elif self.stochastic_learning:
            why = "full-batch learning (learning='full-batch')"
        elif family is not None and (family.blurred or family.frequency):
            why = f"delta bases (blur 'auto' or 'delta', not {self.blur!r})"
        elif likelihood is not None and "noise_variance" not in likelihood.learnable:
            why = f"the gaussian likelihood (not {likelihood.name!r})"
        if why:
            return ("learning_start={start} learns near the variational fit first, which "
                    f"needs {why}")
        if self.max_fit_time is not None:  # each fit would take the whole budget
            return ("learning_start={start} makes two or three fits, each within "
                    "max_fit_time: give one or the other")
        return None

    def chosen_learning_start(self, likelihood, n_rows):
        """The learning start this plan runs on ``n_rows`` rows: ``"auto"`` is
        ``"race"`` for a plain Gaussian regression that learns on every row, as the
        race was measured (SE kernel, K-means bases with learnt means, no given
        lengthscales, no input groups but the one-hot columns' own, no additive
        terms, no restarts, FITC; none of :meth:`_start_refusal`'s objections), else
        ``"data"``."""
        if self.learning_start != "auto":
            return self.learning_start
        family = None if self.blur == "auto" else blur_family(self.blur)
        last = stage_sizes(self.hyper_subsample)[-1]
        plain = (self.bases is None and self.learn_bases == "auto"
                 and self.lengthscale is None and self.kernel == "se"
                 and self.feature_groups in (None, "auto") and self.additive_groups is None
                 and not self.n_restarts_optimizer and self.approximation == "fitc")
        every_row = last is None or n_rows <= last
        racing = plain and every_row and self._start_refusal(likelihood, family) is None
        return "race" if racing else "data"

    @single_scipy_thread
    def run(self, X, targets, likelihood, *, signal_variance, column_std, labels=None,
            init_sites=None, centre=None, progress=None, offset=0.0, classes=None,
            feature_names=None, held_out=None):
        """Fit: bases, starting values, learning, EP on all rows.

        Parameters
        ----------
        X : ndarray or dask array of shape (n_samples, n_features)
            Checked rows (lazy inputs are trained on chunk by chunk on Dask).
        targets : ndarray or dask array of shape (n_samples,)
            EP's targets (labels as +-1, centred values, counts).
        likelihood : likelihood object at its starting values
        signal_variance : float
            The starting signal variance.
        column_std : ndarray of shape (n_features,)
            The inputs' standard deviations (the data-driven lengthscales).
        labels : sequence, optional
            One-vs-rest: one EP problem per label on shared blocks (``targets`` are
            then the class labels).
        init_sites : (tau, nu), optional
            Warm-start sites (shape (n_samples,) or (n_problems, n_samples)).
        centre : (float, likelihood), optional
            Signal variance and likelihood as the data alone would start them: the
            centre of the box the values are learnt in.
        progress : callable, optional
            Called with each EP sweep's record.
        offset, classes, feature_names
            Kept in the fitted posterior (the latent offset, the class labels, the
            input columns' names).
        held_out : HeldOut, optional
            Rows the model is measured on as it learns and at the end
            (:mod:`saspa_dask.fitting.held_out`); the report's ``held_out_trace_``.

        Returns
        -------
        FitResult
        """
        self.validate(likelihood, 1 if labels is None else len(labels))
        run = FitRun(self, X, labels, progress)

        def posterior_of(outcome):
            return self._posterior(outcome, likelihood, offset, classes, feature_names)
        if held_out is not None:
            run.watch = HeldOutWatch(held_out, run.began, posterior_of, run.say)
        groups = feature_groups_of(self.feature_groups, feature_names, X.shape[1])
        terms = additive_terms_of(self.additive_groups, feature_names, X.shape[1])
        basis, start = run.start(likelihood, signal_variance, column_std, centre, groups,
                                 terms)
        sites = check_init_sites(init_sites, X.shape[0], 1 if labels is None else len(labels))
        state = run.fit(targets, powered(likelihood, float(self.alpha)), basis, start,
                        sites)
        outcome, rows = state.outcome, state.learnt_rows
        self._check_jitter(outcome)
        result = FitResult(posterior_of(outcome))
        result.report = {**run.report, **self._report(outcome, X.shape[0], rows,
                                                      feature_names)}
        if run.watch is not None:  # the rows whose sites make the final model
            run.watch.measure(result.posterior,
                              rows=state.sample_rows.size if state.sample_model
                              else X.shape[0])
            result.report["held_out_trace_"] = run.watch.trace
        run.say_done(result.report)
        return result

    def _check_jitter(self, outcome):
        asked = self.jitter * outcome.hyper.signal_variance
        if outcome.jitter > asked * (1 + 1e-12):
            warnings.warn(f"basis covariance needed jitter {outcome.jitter:.3g} (asked "
                          f"{asked:.3g}): bases nearly coincide", UserWarning, stacklevel=6)

    def _posterior(self, outcome, likelihood, offset, classes, feature_names):
        hyper = outcome.hyper
        fitted = likelihood.with_hyperparameters(hyper.likelihood)
        if hyper.mean_offset is not None:
            # EP's sites are functions of f; the learnt constant mean joins the offset
            # every prediction adds (a shift of f that the likelihood saw)
            offset = offset + hyper.mean_offset
        return FittedPosterior(
            outcome.basis.means, outcome.basis.blur, hyper.lengthscale, hyper.signal_variance,
            outcome.jitter, outcome.L, [r.posterior for r in outcome.results], fitted.name,
            fitted.params(), offset=offset, classes=classes, feature_names=feature_names,
            frequencies=outcome.basis.frequencies, phases=outcome.basis.phases,
            approximation=approximation_named(self.approximation),
            log_target=bool(self.log_target), kernel=hyper.kernel, additive=hyper.additive,
            term_weights=hyper.term_weights)

    def _report(self, outcome, n_samples, rows, feature_names=None):
        """The learning and EP report of a fit (attribute name -> value); a warning
        names the values learnt onto a bound (a lengthscale by its input's name)."""
        info = dict(outcome.info or {})
        if self.optimize_hyperparameters:
            info.update(learn_bases=self.learnt_bases,
                        n_rows_learnt=int(n_samples if rows is None else rows.size))
        if info.get("at_bounds"):
            warnings.warn(bound_advice(by_input_name(info["at_bounds"], feature_names)),
                          LearntBoundWarning, stacklevel=6)
        stopped = learning_stopped_advice(info)
        if stopped is not None:  # as the CLI says it: a Python fit warns too
            warnings.warn(stopped, LearningStoppedWarning, stacklevel=6)
        results = outcome.results
        one = len(results) == 1
        report = {
            "blur_scale_": outcome.hyper.blur_scale,
            "hyperparameter_trace_": outcome.trace or [], "hyperparameter_info_": info,
            "sites_tau_": stacked([r.tau for r in results]),
            "sites_nu_": stacked([r.nu for r in results]),
            "n_sweeps_": max(r.n_sweeps for r in results),
            "converged_": all(r.converged for r in results),
            "ep_stop_reason_": _ep_stop_reason(results),
            "log_evidence_": float(sum(r.log_evidence for r in results)),
            "coarse_start_": [level if one else {**level, "problem": k}
                              for k, r in enumerate(results) for level in r.coarse_start],
            "history_": results[0].history if one else [
                {**rec, "problem": k} for k, r in enumerate(results) for rec in r.history]}
        for name in _EP_COUNTS:
            report[f"{name}_"] = int(sum(getattr(r, name) for r in results))
        return report


def _ep_stop_reason(results):
    """Why EP on all rows stopped (the first problem that did not converge says)."""
    for result in results:
        if not result.converged:
            return "time" if result.stopped_by_time else "max_sweeps"
    if any(result.converged_on == "predictions" for result in results):
        return "predictions"
    return "converged"
