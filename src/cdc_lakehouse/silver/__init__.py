"""Silver: committed transactions, net change per transaction and row, replicas."""
