"""The documented range of every count, size, id and time apportion accepts.

Checked at every edge (the REST API's request models, the scenario parser, the
CLI) before anything is built, so an absurd number is a clear error naming the
field, never an overflow, a 5xx or a process that grows until the kernel kills
it. docs/api.md and docs/simulate.md list them.
"""

from __future__ import annotations

#: ids, versions and every other integer stored in a database column (BIGINT).
MAX_INT64 = 2**63 - 1
#: whole GPUs one pod may ask for (all on one node), and GPUs on one node.
MAX_GPUS_PER_POD = 1024
MAX_NODE_GPUS = 1024
#: pods of one workload.
MAX_PODS = 10_000
#: GPU memory of one device or one request, MiB (16 TiB).
MAX_GPU_MEMORY_MIB = 16 * 1024 * 1024
#: host resources of one pod or node: cores and MiB (1 PiB).
MAX_CPU = 1_000_000
MAX_MEMORY_MIB = 1024**3
#: a reservation, in GPUs.
MAX_RESERVATION_GPUS = 1_000_000
#: a duration, delay, grace or scenario time, in seconds (100 years).
MAX_SECONDS = 100 * 365 * 86400
#: a point in time as epoch seconds: 1970-01-01 .. 9999-12-31T23:59:59Z.
MAX_EPOCH_SECONDS = 253_402_300_799
#: shapes in a pool's typical pods (its prior, SPEC 5), and the count of one shape.
MAX_TYPICAL_SHAPES = 64
MAX_TYPICAL_COUNT = 1_000_000
#: nodes of one pool, workloads and events of one scenario file.
MAX_NODES = 100_000
#: GPUs of all nodes of one scenario file (each device is simulated).
MAX_SCENARIO_GPUS = 1_000_000
MAX_SCENARIO_WORKLOADS = 100_000
#: teams of one organization (or one scenario file), and tree depth.
MAX_TEAMS = 10_000
