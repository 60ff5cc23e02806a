"""TVsub training episodes that no doctrans training ever reads.

``TVSUB_HELD_OUT`` are the document ids at sorted positions 300, 330, …, 2940 of TVsub's
``train/`` (89 of 2,959 episodes, 62,979 lines, 2.9%): every 30th episode after the
quickstart slice (positions 0–299), so the slice is unchanged and the whole corpus loses an
even spread of shows. ``doctrans preprocess`` on TVsub drops them from the train split of any
selection (``--train-docs all`` as well as a slice that reaches them) and records them in
``meta.json`` (``config.held_out``). They are meant for tests that must be built from text no model saw (a
context-needed test large enough to tell models apart).

The ids are listed, not computed, so that they stay the same if the corpus directory gains or
loses files. Changing this list invalidates every test built from it.
"""
from __future__ import annotations

TVSUB_HELD_OUT: tuple[str, ...] = tuple(str(i) for i in (
    300, 330, 360, 390, 420, 450, 480, 510, 540, 570, 600, 630, 660, 690, 720, 750, 781, 811,
    841, 871, 901, 931, 961, 991, 1021, 1051, 1082, 1112, 1142, 1172, 1202, 1232, 1264, 1295,
    1327, 1360, 1393, 1423, 1453, 1483, 1513, 1543, 1573, 1603, 1633, 1663, 1693, 1723, 1753,
    1783, 1813, 1843, 1873, 1903, 1933, 1963, 1993, 2023, 2054, 2084, 2114, 2144, 2174, 2204,
    2234, 2264, 2294, 2324, 2354, 2384, 2415, 2445, 2475, 2505, 2535, 2565, 2596, 2626, 2656,
    2686, 2716, 2746, 2776, 2806, 2836, 2866, 2896, 2926, 2956,
))
