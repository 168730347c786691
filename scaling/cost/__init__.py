"""Back-of-the-envelope sums with their units: training and inference compute, time, money, memory."""
