"""Same-run reference: torch's fused_all_gather_matmul (SymmetricMemory async-TP) and host AG->matmul at the bench
shapes, median of 30 (run with `torchrun --nproc-per-node 2`). Measurement only; not used by cuco."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def bench(fn, iters=30, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    ts = []
    for _ in range(iters):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    name = dist.group.WORLD.group_name
    symm_mem.enable_symm_mem_for_group(name)
    for m, k, n in [(8192, 8192, 8192), (16384, 8192, 3584), (4096, 4096, 4096), (32768, 8192, 8192)]:
        a = torch.randn(m // ws, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        def host():
            dist.all_gather_into_tensor(full, a); return full @ b
        def fused():
            return torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=name)
        t_host, t_fused, t_mm = bench(host), bench(fused), bench(lambda: full @ b)
        if rank == 0:
            print(f"TORCH M={m} K={k} N={n} host={t_host:.4f} fused={t_fused:.4f} matmul={t_mm:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
