"""Why the DIAYN agents do not do the task: per run and phase, over the phase's last 100k steps, from a committed
series alone (this probe's, or another's given as the argument):

    python docs/results/diayn-ways-8x8/diagnosis.py [SERIES]

the mean episode length (every env's episodes; ColorDoorKeyBand-8x8 cuts an episode at 640 steps), the skill reward
per step (`diayn/reward_mean`: log q(z|s') + log 8, over the steps with skills), the mean offset that guided draws
give it (KL(p || uniform) of the logged skill distribution, log 8 - H(p): the mean of log(8 p(z)) over the draws),
the episodes that ended in the envs with skills and in those without, and their mean returns (`--skill-envs`; "-"
where every env has skills: with 8 of 16 envs, 100k steps are 50k in each kind, so N episodes there last about
50,000 / N steps). The episodes are counted over the whole 2,000-step bins inside the window and the skill envs'
over the rollouts logged in it, so the split of a window's edges can differ by a rollout.
"""

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from common.series import read, window_mean  # noqa: E402

WINDOW = 100_000


def readings(rec: dict) -> list[dict]:
    """Per phase: length, skill reward, return with and without skills (nan where none)."""
    scalars, bins = rec["scalars"], rec["episodes"]
    starts = [p["start"] for p in rec["phases"]]
    ends = [*starts[1:], max(s for s, _ in scalars["losses/entropy"]) + 1]
    counts = dict(scalars.get("diayn/skill_env_episodes", []))  # step: episodes ended in the envs with skills
    width = bins["bin"]
    out = []
    for end in ends:
        low = end - WINDOW
        first, stop = math.ceil(max(low, 0) / width), math.floor(end / width)  # the whole bins, as window_mean cuts
        count, total = sum(bins["count"][first:stop]), sum(bins["return"][first:stop])
        pairs = [(v, counts.get(s, 0)) for s, v in scalars.get("diayn/skill_env_return", []) if low <= s < end]
        skill_count, skill_total = sum(n for _, n in pairs), sum(v * n for v, n in pairs)
        rewards = [v for s, v in scalars.get("diayn/reward_mean", []) if low <= s < end]
        probs = {}  # step: the logged skill distribution
        for tag in (tag for tag in scalars if tag.startswith("skills/prob_")):
            for s, v in scalars[tag]:
                if low <= s < end:
                    probs.setdefault(s, []).append(v)
        offsets = [float(np.log(len(p)) + sum(x * np.log(x) for x in p if x > 0)) for p in probs.values()]
        out.append(
            dict(
                length=window_mean(bins, low, end, "length"),
                reward=float(np.mean(rewards)) if rewards else float("nan"),
                offset=float(np.mean(offsets)) if offsets else float("nan"),
                episodes_with=skill_count,
                episodes_without=count - skill_count,
                with_skills=skill_total / skill_count if skill_count else float("nan"),
                without=(total - skill_total) / (count - skill_count) if count - skill_count > 0 else float("nan"),
                all_skills=count - skill_count <= 0,
            )
        )
    return out


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv else Path(__file__).resolve().parent / "series.jsonl.gz"
    print(
        "| run | seed | episode length | skill reward per step | its mean offset from guided draws "
        "| episodes, envs with skills / without | return, envs with skills | without skills |"
    )
    print("|-|-|-|-|-|-|-|-|")
    for rec in sorted(read(path), key=lambda r: (r["method"], r["seed"])):
        if not rec["finished"]:
            continue
        phases = readings(rec)
        cells = [
            " / ".join(f"{p['length']:.0f}" for p in phases),
            " / ".join(f"{p['reward']:.2f}" for p in phases),
            " / ".join(f"{p['offset']:.3f}" for p in phases),
            " ; ".join(
                f"{p['episodes_with']:.0f}" + ("" if p["all_skills"] else f" / {p['episodes_without']:.0f}")
                for p in phases
            ),
            " / ".join(f"{p['with_skills']:.3f}" for p in phases),
            "-" if all(p["all_skills"] for p in phases) else " / ".join(f"{p['without']:.3f}" for p in phases),
        ]
        print(f"| {rec['method']} | {rec['seed']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
