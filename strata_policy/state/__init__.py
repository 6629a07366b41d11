"""The per-cluster store: node matrix, quota tree, running workloads, generations, locks."""
