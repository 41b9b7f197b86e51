"""Every model-facing text flower writes, in one place, in our own words.

These strings are permanent context cost: the coordinator rules ride in every main-thread request,
a denial reason in every denied call's result, an expiry note in every expired result. Keep them short,
read them together, and measure them (`python -m bench` prints their lengths).
"""

from __future__ import annotations

# --- layer one: roles and walls ---------------------------------------------------------------

# --- layer two: workbench ---------------------------------------------------------------------

# --- layer three: spill -----------------------------------------------------------------------

# --- layer four: rewrites on resume -----------------------------------------------------------

# --- generations and interrupts ---------------------------------------------------------------
