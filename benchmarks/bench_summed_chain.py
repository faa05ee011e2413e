"""Issue #42.3's ratio: the sampling engine's CPU on models/uncertain_stay_chain.py (3 levels, 5 days,
p_stay ~ Beta(2, 2); idp of day 0, a Laplace(2) sum) over the structured engine's on the same model,
both in one process, structured first, each audit timed with `time.process_time()` (target: 10x).

Prints one JSON line: the two CPU times, their ratio, the C compiler's CPU in child processes
(PyTensor compiling its C modules: not in `process_time`), the load average at the end, and both
leakages with the sampling interval. Cold: a compile directory of PyTensor's own that is new; warm:
the same directory again, in a second process:

    PYTENSOR_FLAGS=base_compiledir=/tmp/ptc_new python benchmarks/bench_summed_chain.py   # cold
    PYTENSOR_FLAGS=base_compiledir=/tmp/ptc_new python benchmarks/bench_summed_chain.py   # warm
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

from ddpbayes import audit, load_model

MODEL = Path(__file__).resolve().parent.parent / "models" / "uncertain_stay_chain.py"


def timed(engine: str) -> tuple[float, object]:
    """CPU seconds of one audit by `engine` (the model loaded before timing) and its result."""
    model = load_model(MODEL)
    start = time.process_time()
    result = audit(model, "sum", "laplace", "idp", scale=2.0, targets=[0], engine=engine, seed=0, workers=1,
                   information=None)
    return time.process_time() - start, result


def main() -> None:
    structured, exact = timed("structured")
    sampling, sampled = timed("sampling")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"structured_cpu_s": round(structured, 3), "sampling_cpu_s": round(sampling, 3),
                      "ratio": round(sampling / structured, 2),
                      "children_cpu_s": round(children.ru_utime + children.ru_stime, 1),
                      "load": [round(x, 1) for x in os.getloadavg()], "structured_leakage": exact.leakage,
                      "sampling_leakage": sampled.leakage, "sampling_interval": sampled.ci}))


if __name__ == "__main__":
    main()
