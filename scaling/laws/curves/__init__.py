"""Training curves, not only final losses: the curves a run store holds (`store`, Approach 1's
input and the report's), the curves with each run's learning-rate schedule (`runs`), the loss
along a curve under any schedule (`law`, Tissue et al. 2024), L(N, D) fitted from every point of
every curve (`fit`), and synthetic curves from a known law (`simulate`)."""
