"""Live-source test harness: real PostgreSQL and MariaDB servers, a random workload, and an
independent replay of the landing files the capture tools write."""
