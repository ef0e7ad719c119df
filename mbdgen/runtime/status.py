"""Status codes returned by jitted steps; :data:`MESSAGES` turns them into words."""

OK = 0
SINGULAR = 1
NONFINITE = 2

MESSAGES = {
    OK: "finished",
    SINGULAR: (
        "the augmented matrix [[M, Φ_qᵀ], [Φ_q, 0]] became singular: the constraints are "
        "redundant or the mechanism reached a singular configuration"
    ),
    NONFINITE: "the solution became NaN or infinite (step size too large or unstable method?)",
}
