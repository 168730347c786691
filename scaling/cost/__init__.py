"""Back-of-the-envelope sums for planning a run, each result with its units and assumptions.

    training   FLOPs per token from a shape (the count of `scaling.train.counts`), achieved
               throughput, and compute C = 6 N D as GPU-hours, wall-clock days and dollars
    inference  lifetime inference FLOPs (2 N per generated token) against training, and the
               inference-aware optimum (Sardana et al. 2024)
    rules      D = 20 N and a fixed-N split beside a law's compute-optimal allocation
    memory     weights by dtype (total parameters), dense attention scores (n^2), an SSM's state,
               attention against recurrence (n = d)
    result     the base of every result (`to_dict()`), and the number formats of its texts

Pure functions, no I/O; `scaling cost ...` (scaling/cli/cost.py) prints them. The public names
are re-exported here:

    from scaling import cost
    cost.training_cost("Chinchilla", 70e9, 1.4e12, cost.throughput(gpu="h100", mfu=0.4))
"""

from scaling.cost.inference import (
                                    InferenceAwareOptimum,
                                    InferenceAwarePoint,
                                    InferenceCost,
                                    InferenceRow,
                                    inference_aware_optimum,
                                    inference_cost,
)
from scaling.cost.memory import (
                                    DTYPE_BYTES,
                                    AttentionScoresMemory,
                                    AttentionScoresRow,
                                    Crossover,
                                    CrossoverRow,
                                    SSMState,
                                    WeightMemory,
                                    attention_recurrence_crossover,
                                    attention_scores_memory,
                                    ssm_state_memory,
                                    weight_memory,
)
from scaling.cost.result import SIX_ND, Result, check_allocation, fixed_sci, format_bytes, format_ratio
from scaling.cost.rules import AllocationRow, RulesCheck, rules_of_thumb
from scaling.cost.training import (
                                    GPU_PRESETS,
                                    FlopCount,
                                    ModelShape,
                                    Throughput,
                                    TrainingCost,
                                    flops_per_token,
                                    throughput,
                                    training_cost,
)

__all__ = [
    "AllocationRow", "AttentionScoresMemory", "AttentionScoresRow", "Crossover", "CrossoverRow",
    "DTYPE_BYTES", "FlopCount", "GPU_PRESETS", "InferenceAwareOptimum", "InferenceAwarePoint",
    "InferenceCost", "InferenceRow", "ModelShape", "Result", "RulesCheck", "SIX_ND", "SSMState",
    "Throughput", "TrainingCost", "WeightMemory", "attention_recurrence_crossover",
    "attention_scores_memory", "check_allocation", "flops_per_token", "format_bytes", "format_ratio",
    "inference_aware_optimum", "inference_cost", "rules_of_thumb", "fixed_sci", "ssm_state_memory",
    "throughput", "training_cost", "weight_memory",
]
