"""Demo data for cdc-lakehouse.

``shop_workload`` simulates a small ``shop`` database and writes its changes as landing files
in both capture forms of the data contract (MariaDB binlog and PostgreSQL trigger shadow
tables), plus a table snapshot and the expected final source state; its docstring maps the modules
(simulation, landing forms, summary) behind that command line.
"""
