"""The reference evaluator: runs a fusion op by op with torch (CPU or CUDA),
each node by its op's reference rule. The oracle of the tests."""
from __future__ import annotations

import torch

from .env import Env, bind_inputs, eval_node
from .fusion import Fusion


def evaluate(fusion: Fusion, args: list, device: torch.device) -> list[torch.Tensor]:
    """Values of the fusion's outputs (in order, alias_input outputs included)."""
    env = bind_inputs(fusion.inputs, args, Env(device))
    for v in fusion.exprs():
        env[v] = eval_node(v, env)
    return [env[o.val] for o in fusion.outputs]
