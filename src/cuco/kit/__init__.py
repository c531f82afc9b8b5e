"""The workload kit: template filling, EVOLVE layout, compute libraries (see docs/workloads.md)."""
