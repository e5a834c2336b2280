"""Figure for the README: one four-angle elliptical cone with projected directions, and a limited
chain reaching. Writes docs/cone.png.

    python scripts/cone_figure.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fabrik_addon.solver import ConeLimit, solve_chain  # noqa: E402
from fabrik_addon.solver.limits import resolve_limits  # noqa: E402


def main() -> None:
    cone = ConeLimit(left=math.radians(20), right=math.radians(60), up=math.radians(35), down=math.radians(10))
    fig = plt.figure(figsize=(11, 5))

    ax = fig.add_subplot(1, 2, 1, projection="3d")
    rim = np.array([cone.rim(s) for s in np.linspace(0, 2 * np.pi, 200)])
    for r in rim[::8]:
        ax.plot([0, r[0]], [0, r[2]], [0, r[1]], color="tab:blue", alpha=0.25, lw=0.8)
    ax.plot(rim[:, 0], rim[:, 2], rim[:, 1], color="tab:blue", lw=2, label="cone rim (L 20, R 60, U 35, D 10 deg)")
    rng = np.random.default_rng(3)
    for d in rng.normal(size=(14, 3)):
        d /= np.linalg.norm(d)
        p = cone.project(d)
        if cone.excess(d) > 0:
            ax.plot([d[0], p[0]], [d[2], p[2]], [d[1], p[1]], color="tab:red", lw=1)
            ax.scatter(*d[[0, 2, 1]], color="tab:red", s=12)
            ax.scatter(*p[[0, 2, 1]], color="black", s=12)
    ax.set_xlabel("+X (right)")
    ax.set_ylabel("+Z (up)")
    ax.set_zlabel("+Y (rest direction)")
    ax.set_title("Elliptical cone: outside directions (red) move to the\nnearest direction on the rim (black)")
    ax.legend(loc="lower left", fontsize=8)

    ax2 = fig.add_subplot(1, 2, 2)
    rest = np.array([[0.0, 0.0, 0.45 * i] for i in range(8)])
    cones = [ConeLimit(*(math.radians(a) for a in (35, 35, 20, 50)))] * 7
    target = np.array([1.2, 0.0, 1.6])
    free = solve_chain(rest, target, tolerance=1e-4, max_iterations=100)
    limited = solve_chain(rest, target, limits=cones, tolerance=1e-4, max_iterations=100)
    # Cone excess is the ellipse value minus 1 (0 on the rim, negative inside).
    worst = max(0.0, resolve_limits(cones, rest).violations(limited.joints).max())
    ax2.plot(rest[:, 0], rest[:, 2], "o-", color="0.7", label="rest pose")
    ax2.plot(free.joints[:, 0], free.joints[:, 2], "o-", color="tab:orange", label="no limits")
    ax2.plot(limited.joints[:, 0], limited.joints[:, 2], "o-", color="tab:purple",
             label=f"cones 35/35/20/50 deg: error {limited.error:.1e}")
    ax2.plot(*target[[0, 2]], "x", color="red", ms=12, mew=3, label="target")
    ax2.set_aspect("equal")
    ax2.set_xlabel("X")
    ax2.set_ylabel("Z")
    ax2.set_title(f"7-bone tentacle reaching ({limited.iterations} iterations,\nlargest cone excess "
                  f"{worst:.1e}, ellipse value - 1)")
    ax2.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    out = ROOT / "docs" / "cone.png"
    fig.savefig(out, dpi=90)
    print(out)


if __name__ == "__main__":
    main()
