"""IFToMM benchmark A02 with N = 10 four-bar windows (21 links).

The model of ``iftomm_a02_four_bar.py`` (which cites the benchmark and its data)
with more windows: the benchmark's own case is N = 40; N = 10 keeps the example
suite's per-model runs cheap while the singular positions have 11 instantaneous
degrees of freedom instead of 3.  Same element types as N = 2, so it compiles as
fast (compile cost grows with the number of element types, not of bodies).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from iftomm_a02_four_bar import four_bars  # noqa: E402

sys.path.pop(0)

model = four_bars(10, "iftomm_a02_four_bar_n10")
