# a cpu target under the Kubernetes engine: its pods mount the run store at /shared, so a runs
# folder elsewhere is refused by the engine's start_blocker before any cluster is asked
# (tests/run/test_orchestrate.py, tests/tui/test_run_checks.py)
workload w {
  task pretrain
  model bert(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  engine kubernetes { image = "reg.example/accelctl:1"  volume_claim = "runs"  volume_path = "/shared" }
  target cpu { device = cpu  devices = 2  nodes = 3  engine = kubernetes }
}
