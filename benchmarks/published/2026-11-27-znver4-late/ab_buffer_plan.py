"""One system timed in this fresh process (the A/B in ab-buffer-plan.md): TREE=<source tree>
python ab_buffer_plan.py NETWORK LOG|ort; prints the median ms of 9 repeats of 0.2 s."""
import sys, os, numpy as np, time
sys.path.insert(0, os.environ["TREE"])
import ansor.networks as N
g = N.get(sys.argv[1])
if sys.argv[2] == "ort":
    import onnxruntime as ort
    from ansor.graph.onnx_export import export_onnx
    import tempfile
    p = os.path.join(tempfile.gettempdir(), f"{sys.argv[1]}.onnx")
    if not os.path.exists(p): export_onnx(g, p)
    o = ort.SessionOptions(); o.intra_op_num_threads = 2
    s = ort.InferenceSession(p, o, providers=["CPUExecutionProvider"])
    x = {s.get_inputs()[0].name: np.random.default_rng(0).standard_normal(s.get_inputs()[0].shape).astype(np.float32)}
    fn = lambda: s.run(None, x)
else:
    from ansor.graph.executor import compile_network
    lib = compile_network(g, log_file=sys.argv[2], verbose=False)
    x = {n: np.random.default_rng(0).standard_normal(t.shape).astype(np.float32) for n, t in g.inputs.items()}
    fn = lambda: lib.run(x)
t0 = time.perf_counter()
while time.perf_counter() - t0 < 0.5: fn()
reps = []
for _ in range(9):
    n = 0; t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.2: fn(); n += 1
    reps.append((time.perf_counter() - t0) / n)
print(f"{np.median(reps)*1e3:.3f}")
