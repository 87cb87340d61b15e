"""Student's t at the 5% two-sided level from a table: most tests decided without scipy.

An effect table tests thousands of pairs and shows each one's verdict, never its p-value: is
P(|T| >= |t|) below 0.05, that is, is ``|t|`` above the critical value ``t*(df)``? Importing
``scipy.special`` for the exact p-values costs 0.12-0.2 s in process; a report of 300 records
took 0.54 s with it and 0.31 s without (``benchmarks/README.md``). So this module holds ``t*``
at :data:`NODES` degrees of freedom (:data:`CRITICAL`: ``scipy.special.stdtrit(df, 0.975)``,
checked against it by ``tests/test_t_table.py``) and bounds it between them, as a printed
t-table is read, but in the safe direction: ``t*`` falls and is convex in ``df``, so between
two nodes it lies below the chord joining them and above the lines through the neighbouring
nodes, extended; beyond the last node it is convex in ``1 / df``, so it lies below the chord to
the normal's ``z`` (infinite ``df``) and above the tangent there, ``z + (z^3 + z) / (4 df)``.
A statistic outside those bounds by more than :data:`MARGIN` is decided here; one inside them
(close to the critical value, mostly at few degrees of freedom), another level, or fewer than
one degree of freedom are left to the exact p-value
(:func:`~cnnbench.analysis.ratio_tests.t_two_sided_ps`). The verdicts are the exact test's. No
numpy, no scipy, no torch here.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from statistics import NormalDist

LEVEL = 0.05
"""The two-sided level the table is for (:data:`~cnnbench.analysis.ratio_tests.ALPHA`)."""
NODES: tuple[float, ...] = (*(1 + i / 4 for i in range(61)), *range(17, 65), *range(72, 201, 8))
"""Degrees of freedom of :data:`CRITICAL`: 1 to 16 in quarters, 17 to 64, 72 to 200 in eights."""
CRITICAL: tuple[float, ...] = (
    12.706204736174694, 8.027951377252052, 6.016663104427929, 4.9488478491160866, 4.302652729749462,
    3.875480223220667, 3.5746548420036817, 3.3525454330616054, 3.1824463052837078, 3.048339870186651,
    2.9400886379827282, 2.8509892835917263, 2.7764451051977934, 2.7132058471460594, 2.6589123472044034,
    2.611813092373966, 2.5705818356363146, 2.5341968004662117, 2.501858617589239, 2.472933305883956,
    2.4469118511449786, 2.4233810303648324, 2.4020020079102764, 2.382494400221357, 2.364624251592784,
    2.348194849105371, 2.333039626864974, 2.3190166271461314, 2.306004135204166, 2.293897208375576,
    2.282604893392452, 2.272047978240599, 2.262157162798205, 2.252871560216631, 2.2441374614922958,
    2.2359073109648673, 2.228138851986274, 2.2207944107448077, 2.2138402929187886, 2.2072462729944684,
    2.200985160091639, 2.195032427275849, 2.1893658938043634, 2.1839654517078704, 2.1788128296672284,
    2.1738913883920628, 2.1691859427125406, 2.164682606408688, 2.1603686564627913, 2.1562324139605558,
    2.1522631393099103, 2.1484509398115943, 2.144786687917804, 2.1412619487661058, 2.137868915785115,
    2.134600353343362, 2.131449545559776, 2.128410250517953, 2.1254766592309386, 2.1226433587918767,
    2.1199052992212546, 2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
    2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245, 2.0595385527532972,
    2.0555294386428735, 2.0518305164802846, 2.0484071417952454, 2.045229642132703, 2.0422724563012378,
    2.039513446396408, 2.0369333434601016, 2.0345152974493383, 2.0322445093177186, 2.030107928250343,
    2.0280940009804502, 2.0261924630291093, 2.0243941639119694, 2.022690920036761, 2.021075390306273,
    2.019540970441376, 2.0180817028184443, 2.016692199227824, 2.0153675744437636, 2.014103388880846,
    2.012895598919429, 2.0117405137297655, 2.010634757624232, 2.0095752371292392, 2.008559112100761,
    2.007583770315836, 2.006646805061688, 2.0057459953178687, 2.0048792881880564, 2.0040447832891455,
    2.003240718847872, 2.002465459291007, 2.0017174841452356, 2.000995378088267, 2.0002978220142604,
    1.999623584994939, 1.9989715170333788, 1.998340542520741, 1.997729654317693, 1.9934635666618719,
    1.990063421254446, 1.9872898648311692, 1.984984311522457, 1.9830375264837259, 1.9813718148763053,
    1.9799304050824402, 1.978670849837835, 1.977560776558935, 1.9765750658304433, 1.97569392781527,
    1.9749015600007986, 1.9741851911433248, 1.9735343877061042, 1.9729405423893598, 1.9723964913155805,
    1.9718962236339088,
)
"""``t*`` at each of :data:`NODES`: ``scipy.special.stdtrit(df, 1 - LEVEL / 2)``."""
MARGIN = 1e-9
"""How far outside the bounds a statistic must be to be decided here (above the table's
rounding and scipy's own error by several orders)."""

_Z = NormalDist().inv_cdf(1 - LEVEL / 2)
_TANGENT = (_Z**3 + _Z) / 4  # d t* / d(1/df) at infinite df (Cornish-Fisher's first term)


def below_level(t: float, df: float, alpha: float) -> bool | None:
    """Is Student's two-sided p-value of ``t`` at ``df`` degrees of freedom below ``alpha``?
    None where the table cannot tell (another level, ``df`` below 1 or NaN, ``t`` NaN or within
    :data:`MARGIN` of the bounds of ``t*``): then the exact p-value decides."""
    if not isinstance(alpha, float) or alpha != LEVEL or not df >= 1.0 or math.isnan(t):
        return None  # (a float32 alpha would compare the exact p-value in float32)
    low, high = critical_bounds(df)
    size = abs(t)
    if size > high + MARGIN:
        return True
    if size < low - MARGIN:
        return False
    return None


def critical_bounds(df: float) -> tuple[float, float]:
    """A lower and an upper bound of ``t*(df)`` (``df`` >= 1; infinite: ``z`` and ``z``)."""
    if not df >= NODES[0]:
        raise ValueError(f"the table starts at {NODES[0]:g} degree of freedom, not {df}")
    last = NODES[-1]
    if df >= last:
        return _Z + _TANGENT / df, _Z + (CRITICAL[-1] - _Z) * last / df
    i = bisect_right(NODES, df) - 1
    x0, x1, y0, y1 = NODES[i], NODES[i + 1], CRITICAL[i], CRITICAL[i + 1]
    high = y0 + (y1 - y0) * (df - x0) / (x1 - x0)
    low = y1  # t* falls: at least its value at the next node
    if i + 2 < len(NODES):  # the line through the next two nodes, extended back
        x2, y2 = NODES[i + 2], CRITICAL[i + 2]
        low = max(low, y1 + (y2 - y1) * (df - x1) / (x2 - x1))
    if i >= 1:  # the line through the node before and this one, extended on
        xm, ym = NODES[i - 1], CRITICAL[i - 1]
        low = max(low, y0 + (y0 - ym) * (df - x0) / (x0 - xm))
    return low, high
