"""Docstring fragments shared by the SASPA estimators (numpydoc sections)."""

_SHARED_PARAMS_DOC = """
    n_bases : int or "auto", default="auto"
        Number of basis points M found by K-means (ignored when ``bases`` is given;
        with ``blur="fourier-global"`` the number of features, no K-means).
        ``"auto"`` is 64, and 128 from 500,000 training rows (never more than the
        rows): at 10^6 rows 128 bases gave a lower error in a minute on 2 cores
        (``benchmarks/RESULTS.md``, "How many bases by default").  An EP sweep
        costs O(N M^2).
    blur : {"auto", "full", "diagonal", "spherical", "delta", "fourier", \
"fourier-global"}, default="auto"
        Blur family of the bases: ``delta`` is FITC-EP / SPGP, ``spherical`` the
        multiscale GP, ``full`` SASPA-full (K-means cluster covariances).
        ``"auto"`` is ``full`` for at most 16 inputs and ``diagonal`` above: a full
        blur costs d^2 per row and basis and d^3 per pair of bases in every
        evaluation of the optimiser (``benchmarks/RESULTS.md``, "What learning
        costs"); the choice is ``blur_``.
        ``fourier`` and ``fourier-global`` make the bases frequency inducing
        features (Lazaro-Gredilla & Figueiras-Vidal): f integrated against a Gaussian
        window times a cosine, with a frequency and phase per feature and one window
        shared by all.  ``fourier`` is TFIFGP (each feature centred at a K-means
        centre); ``fourier-global`` is FIFGP (every feature centred on the inputs'
        mean, the window as wide as their spread).  Frequencies start drawn from the
        kernel's spectral density, phases uniform.
    kernel : {"se", "matern12", "matern32", "matern52"}, default="se"
        The kernel's shape, with ARD lengthscales: squared exponential, or Matérn
        with nu = 1/2, 3/2, 5/2 (rougher functions; scikit-learn's ``Matern``
        lengthscale convention).  Exact for ``blur="delta"``; for the other blurs the
        blurred Matérn bases are a short scale mixture of blurred SE ones (within
        0.45% of Matérn in relative terms, tails included, down to 1e-4 of s2; 7-11
        terms, each costing as much as the SE kernel's;
        ``saspa_dask.core.kernel_profiles``).  Not for frequency features.
    feature_groups : {"auto", "one-hot"}, sequence of labels or None, default="auto"
        Inputs that share one learnt lengthscale.  ``"one-hot"``: the one-hot columns
        of each text column (named ``column=category``, as ``saspa ingest`` writes
        them; a DataFrame's columns named so likewise) share one, which makes the kernel over
        that column exchangeable (any two different categories equally similar,
        learnt per column); a sequence of one label per input groups by label.
        None: a lengthscale per input.  ``"auto"``: ``"one-hot"`` when some inputs
        are named ``column=category``, else None.  Fewer learnt values on one-hot
        tables, and better held-out numbers on the tables measured (RESULTS, "Tied
        lengthscales by default on one-hot tables").
    additive_groups : {"one-hot"}, sequence of labels or None, default=None
        A sum of kernels over groups of inputs, s2 sum_g w_g k(x_g), the weights
        w_g (summing to one) learnt with the kernel (``term_weights_``): an additive
        model.  ``"one-hot"``: one term over the inputs that are not one-hot and one
        over each text column's one-hot columns (with ``feature_groups="one-hot"``
        too, each text column's term is an exchangeable category kernel: an effect
        per category, shrunk towards the others); a sequence of one label per input:
        one term per label.  Each term meets a blurred basis through the blur's
        marginal over its inputs (``saspa_dask.core.kernel_sums``); every term has
        the ``kernel`` shape.  Not for frequency features.  None: one kernel over
        every input.
    term_weights : array-like of shape (n_terms,), default=None
        Starting weights of ``additive_groups``' terms (positive; normalised to sum
        to one), in the order of the terms' first inputs; None: equal.  The values
        a fit keeps without ``optimize_hyperparameters`` (``retrain`` passes a
        model's ``term_weights_``).
    approximation : {"fitc", "dtc", "sor"}, default="fitc"
        The sparse prior.  ``"fitc"`` keeps each row's residual variance
        s2 - k^T Kh^{-1} k (FITC-EP for delta blur, SASPA otherwise: the paper's
        method); ``"dtc"`` lets the likelihood see only the projection of f onto the
        bases (DTC-EP, a baseline; predictions keep the residual); ``"sor"`` (subset
        of regressors) trains as DTC and predicts from the degenerate prior
        K(x, B) Kh^{-1} K(B, x) too, so its latent variance falls to zero away from
        the bases: the failure the sparse-GP literature warns of, kept as a comparison
        mode.
    alpha : float in (0, 1], default=1.0
        The power of power EP (Minka; Bui, Yan & Turner 2017): each site update
        removes alpha of the site from the posterior, matches moments against the
        likelihood to the power alpha, and takes the projected update to the power
        1 / alpha; the objective learnt is the power-EP energy.  ``alpha=1`` is EP as
        published (FITC-EP / SASPA); as alpha goes to 0 the fit tends to Titsias'
        variational (VFE) one, which does not shrink the noise to explain the data
        with learnt bases.  Predictions, the evidence and learning all follow alpha.
    lengthscale : float or array-like of shape (n_features,), default=None
        ARD lengthscales; ``None`` uses ``std(X[:, k]) * sqrt(n_features)`` (a
        regression may start from an exact GP's instead: ``exact_start``).
    signal_variance : float, default=None
        Kernel amplitude s2; ``None`` uses {s2_default}.
    bases : saspa_dask.Basis, default=None
        Explicit bases (means and covariances); skips K-means.
    jitter : float, default=1e-8
        Diagonal jitter added to the basis covariance, relative to s2; raised tenfold
        until the Cholesky factorisation succeeds.  The value used is ``jitter_``.
    random_state : int, RandomState or None, default=None
        Seed of K-means.
    verbose : int or bool, default=0
        If > 0, print what the fit is doing (K-means, hyperparameter learning, EP)
        and one line per EP sweep and optimiser iteration to standard error.  At 0, a
        fit of 50,000 rows or more still prints its phase lines (a long fit is never
        silent); ``verbose=False`` silences those too.
    optimize_hyperparameters : bool, default=True
        Maximise the EP evidence over the ARD lengthscales, the signal variance and
        the likelihood's parameters (L-BFGS-B in log space; each evaluation is an EP
        run warm-started from the best sites so far, plus one gradient pass that
        costs about three sweeps).  The given values are the starting point.
    max_hyper_iter : int, default=500
        Safety cap on the optimiser's iterations (about 1-2 EP runs each); a fit
        that reaches it is reported as not converged
        (``hyperparameter_info_["stop_reason"] == "cap"``).
    hyper_tol : float, default=1e-4
        The optimiser has converged when the energy rose by less than ``hyper_tol``
        nats per row per iteration over the last 5 iterations, or when the largest
        entry of the projected gradient is below ``hyper_tol`` per row and the last
        iteration changed the energy by less than that too (per row: the targets'
        units shift the energy but not its changes; ``benchmarks/RESULTS.md``, "When
        learning stops", measures the choice).  0 runs to the cap or budget.
    max_fit_time : float or None, default=None
        Wall-clock budget in seconds for the whole fit, counted from its start (the
        best model by then).  Learning (all starts and stages) stops at its best
        point so far (``stop_reason == "time"``) early enough for EP on all rows to
        build its blocks, run a sweep and close by the end, at the cost per row
        that learning's own block builds and EP sweeps measured; EP on all rows,
        started from the learning subsample's posterior scaled to all rows, then
        stops between sweeps when another would end after the budget: ``converged_`` is then
        False, with an ``EPConvergenceWarning`` (measured at 10^6 rows in
        ``benchmarks/RESULTS.md``, "An anytime fit": after one sweep the held-out
        error and NLP were within 2e-4 and 5e-4 of the converged model's).  A Gaussian
        likelihood's first sweep sets the fixed point: with no room for the sweep that
        computes the evidence, it ends converged, ``log_evidence_`` NaN.  When the
        time left once learning's first sweeps are timed holds that reserve less
        than twice, the model is EP at the learnt values on a row sample instead:
        the most rows whose reserve that time holds twice (up to the largest
        learning stage, or the rows whose basis features take 256 MiB if more), a
        prefix of learning's row permutation, learning stopping early enough for it;
        or learning's own sample's EP when that is no more rows (either way its
        sites on the other rows zero, ``n_sweeps_`` 0, ``log_evidence_`` NaN, not
        converged, with the warning): learning's first iterations gain far more
        than EP on all rows at the starting values.  With
        warm-start sites EP on all rows always runs at least one sweep, so a small
        budget can be overrun by a sweep on all rows.  The budget also sizes the
        start: K-means' Lloyd passes run over the rows 5% of it pays for
        (``kmeans_info_["lloyd_rows"]``), and a budget shorter than 4.5 estimated
        evaluations of learning's first stage learns first on half its rows
        (:class:`~saspa_dask.fitting.budget.FitBudget`).
        None: no budget.
    n_restarts_optimizer : int, default=0
        Further evidence maximisations, from the starting lengthscales shortened by
        factors spread geometrically from 1 to 1/sqrt(n_features) (so the last starts
        at one standard deviation per input when ``lengthscale`` is the default); the
        hyperparameters with the highest evidence are kept.  In many dimensions the
        evidence has several maxima.  Each restart costs a whole maximisation.
    learn_blur_scale : bool, default=False
        Also learn one multiplier of the K-means blur covariances (not for delta).
    learn_bases : {"auto", False, "means", "means+blur"}, default="auto"
        Also learn the bases by the EP evidence, starting from K-means (or
        ``bases``): ``"means"`` moves the basis means (SPGP's pseudo-inputs for delta
        blur; centres, frequencies and phases for ``blur="fourier"``, frequencies and
        phases for ``"fourier-global"``, whose centre stays put); ``"means+blur"``
        also learns each basis's blur (a log-width for spherical, a log-variance per
        input for diagonal, a Cholesky factor for full, the shared window for
        fourier; not for delta).  Needs ``optimize_hyperparameters=True``.
        ``"auto"`` is ``"means"`` when the hyperparameters are learnt and the bases
        come from K-means, ``False`` otherwise (given ``bases`` stay where they are):
        learnt means had the better held-out NLPD on every measured regression set
        and M, and the lower error on Ionosphere over 20 splits; on one set (cpu_act)
        their RMSE was worse (``benchmarks/RESULTS.md``, "Learnt bases").  The gradient costs
        the same pass as the lengthscales' (per-chunk moments of the inputs), but the
        optimiser has M d (or more) extra values, so allow ``max_hyper_iter`` to grow.
        With many bases per row the evidence can overfit; ``benchmarks/RESULTS.md``
        has train and held-out NLPD side by side.
    hyper_subsample : int, list, str or None, default=20000
        With ``optimize_hyperparameters`` and more rows than this, the
        hyperparameters (and bases) are learnt on a uniform subsample of this many
        rows (drawn with ``random_state``, read chunk-wise), and EP then runs on all
        rows at the learnt values.  ``hyperparameter_info_["n_rows_learnt"]`` says how
        many rows were used.  None: always all rows.  Stages: increasing sizes, each
        warm-started from the last, ``"all"`` (or None) last to finish on every row:
        ``[20000, 100000, "all"]`` or the CLI's ``"20000,100000,all"``.
    learning : {"full-batch", "stochastic"}, default="full-batch"
        How the hyperparameters (and bases) are learnt.  ``full-batch``: L-BFGS-B,
        each evaluation a full EP run (on ``hyper_subsample`` rows when the data has
        more).  ``stochastic``: on minibatches of every row (Hernandez-Lobato &
        Hernandez-Lobato 2016): every row keeps its EP site (16 bytes a row), EP
        updates a minibatch's sites against the global approximation, and Adam moves
        the kernel, likelihood and basis parameters by the minibatch's unbiased
        estimate of the energy's gradient (variance-reduced each epoch); memory
        grows with the rows by those sites only, and ``max_fit_time`` ends it with
        the values reached.  EP on all rows then runs
        at the learnt values either way.  Measured (``benchmarks/RESULTS.md``,
        "Stochastic learning"): on Kin-40k with delta bases it reached full-batch's
        held-out accuracy at a third of its CPU; on Pumadyn-32nm and with full blurs
        full-batch stayed ahead, so it is not the default.
    stochastic : StochasticLearning, dict or None, default=None
        How ``learning="stochastic"`` runs (:class:`saspa_dask.StochasticLearning`:
        ``batch_rows``, ``learning_rate``, ``max_epochs``, ``tol``).
    ep : EPSchedule, dict or None, default=None
        How EP runs (:class:`saspa_dask.EPSchedule`: ``mode``, ``damping``,
        ``max_sweeps``, ``tol``, ``anderson_memory``, ``coarse_start``); a dict sets
        some fields, None keeps the defaults.  ``damping=None`` picks it by
        likelihood (0.8 for step and noisy probit, 0.5 for Student-t: not
        log-concave, undamped EP can oscillate on them; 1.0 otherwise).
    execution : Execution, dict or None, default=None
        Where the work runs, with no effect on the fitted model
        (:class:`saspa_dask.Execution`: ``block_rows``, ``cache``, ``work_dir``).
"""

_SHARED_ATTRS_DOC = """
    bases_ : Basis
        Basis means (M, d) and the blur covariances used (M, d, d).
    alpha_ : ndarray of shape (M,)
        The paper's alpha: predictive mean = Kt(x, B) @ alpha_.
    beta_ : ndarray of shape (M, M)
        The paper's beta: latent variance = s2 - k^T beta_ k.
    sites_tau_, sites_nu_ : ndarray or dask array of shape (n_samples,) or (n_classes, n_samples)
        Site precisions and shifts on the projected values (one row per class for a
        one-vs-rest multi-class model).  After a fit on Dask or zarr rows, a Dask array
        that reads them from where the workers wrote them (a folder in
        ``execution["work_dir"]``, removed with the last array that reads it; the
        model a training job returns reads its saved store): the driver never holds
        them whole.  A loaded model of more than 2^24 training rows reads them from
        its store likewise (``saspa_dask.models.stored_sites``).
    n_sweeps_ : int
        Sweeps made, including the one that found the sites converged.
    converged_ : bool
    ep_stop_reason_ : {"converged", "predictions", "max_sweeps", "time"}
        Why EP on all rows stopped: at ``tol``, when its predictions had settled after
        learning on a row sample (``EPSchedule.prediction_tol``; converged too), at
        ``max_sweeps``, or at the ``max_fit_time`` budget (then ``converged_`` is False
        too).
    log_evidence_ : float
        EP approximation of log p(y) (NaN if a cavity is invalid at the end); for
        one-vs-rest, the sum over the classes' binary problems.
    n_invalid_cavities_ : int
        Site updates skipped over all sweeps because the cavity was invalid.
    n_skipped_updates_ : int
        Sequential updates rejected because they would make the posterior singular.
    n_damping_halvings_ : int
        Parallel sweeps' damping halvings forced by an indefinite posterior.
    n_damping_reductions_ : int
        Times EP halved its damping because the site change was cycling (alternating
        up and down for 4 sweeps without progress); each sweep's damping is in
        ``history_``.
    n_anderson_steps_ : int
        Sweeps whose sites were an Anderson combination (``anderson`` in
        ``history_``).
    n_anderson_restarts_ : int
        Times the Anderson history was dropped (growing change, indefinite mix or a
        change of damping).
    history_ : list of dict
        Per sweep: ``sweep``, ``change``, ``n_invalid``, ``damping``, ``anderson``
        (the sites were an Anderson combination), ``log_evidence`` (of the posterior
        the next sweep started from; after grouped sweeps, ``EPSchedule.groups``, only
        the last record's, from an evaluation pass), ``seconds``.
    coarse_start_ : list of dict
        The coarse-start runs of the last EP fit (see ``coarse_start``), coarsest
        first: ``rows``, ``sweeps``, ``converged``, ``seconds`` (including the
        coarser levels); with ``problem`` for one-vs-rest.  Empty if there were none.
    lengthscale_ : ndarray of shape (n_features,)
    signal_variance_ : float
    jitter_ : float
        Absolute diagonal jitter used.
    damping_ : float
    whitening_ : ndarray of shape (M, M)
        L, lower Cholesky factor of Kh + jitter_ I.
    posterior_ : saspa_dask.ep.Posterior
        Whitened posterior (Cholesky of P, h, mu_v); not set for one-vs-rest.
    posteriors_ : list of saspa_dask.ep.Posterior
        One per EP problem (one per class for one-vs-rest, else ``[posterior_]``).
    blur_ : str
        The blur family used (``blur`` with ``"auto"`` resolved).
    blur_scale_ : float
        Multiplier applied to the K-means blur covariances (1 unless learnt).
    likelihood_params_ : dict
        The likelihood's fitted parameters.
    hyperparameter_trace_ : list of dict
        Per optimiser iteration: ``log_evidence``, ``hyperparameters``,
        ``n_evaluations``, ``seconds`` (empty without ``optimize_hyperparameters``).
    held_out_trace_ : list of dict
        Only when ``fit`` was given ``X_val`` and ``y_val``: each measurement of the
        model on them, ``seconds`` since the fit's start, ``stage`` ("learning" or
        "final"), ``rows`` the model was learnt on, ``iteration`` (optimiser
        iteration or stochastic step, None for the final model) and the metrics
        (:mod:`saspa_dask.fitting.held_out`): ``error`` and ``nlp``, or ``rmse``,
        ``mae`` and ``nlpd``.
    hyperparameter_info_ : dict
        Optimiser summary: iterations, evaluations, failed evaluations, message; with
        restarts also ``starts`` (each start's best evidence) and ``chosen_start``;
        ``start`` when learning started from an exact GP on a sample (its rows,
        iterations, seconds and log marginal likelihood per row before and after).
    timings_ : dict
        Seconds spent on ``bases`` (K-means) and ``ep`` (blocks and sweeps).
    kmeans_info_ : dict
        K-means bases only: iterations, inertia, convergence, sample size.
    fitted_posterior_ : saspa_dask.fitting.posterior.FittedPosterior
        Everything predictions use, as one value (the attributes above that describe
        the posterior are read from it).
    n_features_in_ : int
"""


_CLASSIFIER_PARAMS_DOC = _SHARED_PARAMS_DOC.replace("{s2_default}", "1.0")
_REGRESSOR_PARAMS_DOC = _SHARED_PARAMS_DOC.replace(
    "{s2_default}", "the variance of the (centred) targets"
)
