"""Where one rule has a plain-float version and a numpy (or bulk) version, which one runs: every switch
in one place, each with the measurement that set it.

Plain floats win for a few short chains (a numpy call costs ~1-3 us whatever its size, a float operation
~0.07 us); numpy wins across many chains (one call per step for all of them). The pairs and their
equivalence tests are listed in ``docs/architecture.md``. Lowering or raising a value here changes speed
only, never a pose: each pair is held equal by its test.

Pure numbers: the Blender layer imports them from here too (its own switches are the same trade-off).
"""

# --- Blender layer (fabrik_addon/rig) --------------------------------------------------------------

# Standalone chains of one length holding up to this many bones across all armatures are solved one by
# one in mathutils and floats (rig/small.py); above it, numpy across chains (rig/batch.py) is cheaper.
# Measured per frame, handler alone, Blender 5.0.1, one armature: 16 x 3 bones 1.0 ms few-chain against
# 1.5-1.7 batched, 1 x 50 1.0 against 1.6-1.8, 32 x 3 1.9-2.1 against 2.0-2.2 (even), 100 x 3 5.9
# against 3.5.
SMALL_BONES = 96

# From this many chains on, an armature's chain settings are read in one foreach_get per setting
# (rig/plan.py's layout key, rig/batch.py's settings): ~10 us a foreach_get, against 0.15-0.6 us a read
# per chain and setting.
BULK_KEY = 16

# An armature's quaternions are written bone by bone (rig/small.py), or read and written back whole in
# one foreach_get/foreach_set where that is cheaper: a quaternion written bone by bone costs about as
# much as reading and writing BULK_BONES_PER_WRITE bones' rotations in bulk (callgrind, Blender 5.0.1:
# ~12,600 instructions against ~2,000 a bone), and a bulk write has a fixed cost of about
# BULK_FIXED_WRITES single writes (the two calls and the tag).
BULK_BONES_PER_WRITE = 6
BULK_FIXED_WRITES = 4

# --- Solver core (fabrik_addon/solver) -------------------------------------------------------------

# solve_chains (fabrik_batch.py) with fewer than SCALAR_BELOW + (bones - 1) chains solves them one by
# one with the float loop (fabrik.py): measured crossover about 10 chains of 3 bones, 17 of 10 bones.
SCALAR_BELOW = 8

# From this many chains on, the curled starts (start.py) are built in numpy across chains
# (start_batch.py), chain by chain in floats below.
CURL_IN_NUMPY = 8
