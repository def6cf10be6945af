import torch, time
torch.set_num_threads(16)
for dt in (torch.bfloat16, torch.float32):
    for M in (978, 7824):
        for K, N in ((1024, 3072), (1024, 1024), (1024, 4096), (4096, 1024)):
            x = torch.randn(M, K, dtype=dt); w = torch.randn(N, K, dtype=dt)
            f = lambda: torch.nn.functional.linear(x, w)
            for _ in range(3): f()
            ts = []
            for _ in range(7):
                a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
            t = sorted(ts)[3] * 1e3
            print(f"torch {dt} M={M} K={K} N={N} {t:.3f} ms {2*M*N*K/t/1e9:.0f} GF/s")
