"""The algorithm files are self-contained, so a shared function is written once per file: a
fix to one copy must reach every copy. A top-level function or class that several files
define is the same text in all of them, unless it is one of the few that a file adapts on
purpose (named below, with why)."""

import ast
import collections
from pathlib import Path

ALGOS = Path(__file__).resolve().parents[1] / "algos"

# definitions a file adapts to its method: how many versions of each the repository may hold
ADAPTED = {
    "Args": None,  # each file's flags
    "fill_in_defaults": None,
    "Agent": 4,  # plain; continuous; two value heads (intrinsic files); explicit dropout masks (policy file)
    "make_env": 2,  # continuous PPO and SAC (the discrete files' is envs.make_vector_env)
    "ExternalModel": 2,  # one network; a batched ensemble (ensemble file, and the shaping files' both fields)
    "train_external_model": 2,  # the same two
    "poi_values": None,  # each interest field
    "mc_dropout_poi": 2,  # one network; the ensemble class with one member (the shaping files)
    "ForwardModel": 2,  # continuous PPO and SAC
    "train_forward_model": 2,
    "ReplayBuffer": 2,  # interest-weighted (replay file) and SAC's
}


def definitions():
    """{name: {file: source text}} of every top-level function and class in algos/."""
    found = collections.defaultdict(dict)
    for path in sorted(ALGOS.glob("*.py")):
        source = path.read_text()
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found[node.name][path.stem] = ast.get_source_segment(source, node)
    return found


def test_a_definition_shared_by_files_is_the_same_text_in_each():
    shared = {name: files for name, files in definitions().items() if len(files) > 1}
    assert {"compute_gae", "clipped_losses", "layer_init", "model_targets", "IntrinsicRewardScale"} <= set(shared)
    assert set(shared["clipped_losses"]) == {path.stem for path in ALGOS.glob("ppo*.py")}  # every PPO file has it
    for name, files in shared.items():
        versions = collections.defaultdict(list)
        for stem, text in files.items():
            versions[text].append(stem)
        allowed = ADAPTED.get(name, 1)
        if allowed is not None:
            assert len(versions) <= allowed, f"{name}: {len(versions)} versions: {sorted(versions.values())}"


def test_the_two_shaping_files_share_their_common_block_line_for_line():
    found = definitions()
    common = [name for name, files in found.items() if {"ppo_poi_diayn", "ppo_poi_emb"} <= set(files)]
    assert len(common) >= 12  # the modules, the interest fields and the intrinsic-reward block
    for name in common:
        if name not in ("Args", "RANGES", "fill_in_defaults"):
            assert found[name]["ppo_poi_diayn"] == found[name]["ppo_poi_emb"], name


# the files with a per-transition interest: each logs it per kind of transition (common/interest_by_action.py)
INTEREST_BY_ACTION = ("ppo_poi_disagreement", "ppo_poi_emb", "ppo_poi_ensemble", "ppo_poi_grad", "ppo_poi_progress")


def test_the_interest_by_action_logging_is_the_same_lines_in_each_file_with_a_per_transition_interest():
    """Its import, its storage, the step's store and the call: the same four lines, in every such file."""
    blocks = {}
    for path in sorted(ALGOS.glob("*.py")):
        lines = [line for line in path.read_text().splitlines() if "interest_by_action" in line or "next_views" in line]
        if lines:
            blocks[path.stem] = lines
    assert tuple(blocks) == INTEREST_BY_ACTION
    assert len(blocks["ppo_poi_grad"]) == 4
    assert all(lines == blocks["ppo_poi_grad"] for lines in blocks.values())
