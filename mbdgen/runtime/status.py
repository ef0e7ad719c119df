"""Status codes returned by jitted steps; :data:`MESSAGES` turns them into words."""

OK = 0
SINGULAR = 1
NONFINITE = 2
STEP_SIZE_COLLAPSE = 3
REPARTITION = 4
NEWTON_FAILED = 5

MESSAGES = {
    OK: "finished",
    SINGULAR: (
        "the augmented matrix [[M, Φ_qᵀ], [Φ_q, 0]] became singular: the constraints are "
        "redundant or the mechanism reached a singular configuration"
    ),
    NONFINITE: "the solution became NaN or infinite (step size too large or unstable method?)",
    STEP_SIZE_COLLAPSE: (
        "the step size fell below its minimum: the error tolerance cannot be met "
        "(a singularity, a discontinuity, or a tolerance too tight for double precision?)"
    ),
    REPARTITION: (
        "the dependent coordinates' Jacobian Φ_u became ill-conditioned: a new partition "
        "of the coordinates is needed"
    ),
    NEWTON_FAILED: (
        "Newton's method did not solve Φ(u, v, t) = 0 for the dependent coordinates: the "
        "step is too large or the mechanism is near a singular configuration"
    ),
}
