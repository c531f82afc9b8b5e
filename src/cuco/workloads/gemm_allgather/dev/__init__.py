"""Development tools for the GEMM+AllGather workload (standalone driver, build-and-run helpers)."""
