"""The pendulum of tests/models/implicit_pendulum.py with its actuator lag alone, in the
explicit form Ṫ = (u − T)/τ_m (Negrut et al. 2007, Eq. 8a with d = Ṫ − f)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from implicit_pendulum import mechanism  # noqa: E402

sys.path.pop(0)

model = mechanism("explicit", sensors=False, name="lag_pendulum_explicit")
