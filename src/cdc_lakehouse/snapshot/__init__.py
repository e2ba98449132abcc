"""Snapshot reconciliation (CONTRACT §5): a full snapshot of a source table becomes the few
corrective changes that make the replica equal to it, never a reload.

``manifest`` finds snapshot folders and reads their manifests; ``sequence`` places corrections
in the change stream's order; ``compare`` is the partition-parallel comparison with the replica;
``corrections`` writes them as change-stream JSON Lines; ``ledger`` records what happened to each
snapshot; ``reconcile`` is the job step; ``tables`` the job's Unity Catalog tables. Its commands
are a tool, ``cdc_lakehouse.snapshot_cli``. docs/snapshots.md explains it all.
"""
