"""Housekeeping after each pipeline update: change-log compaction, tombstone expiry, landing
archive, shadow-source acknowledgements, OPTIMIZE/VACUUM. ``run`` is the job step, ``cli`` its command;
see docs/snapshots.md (section Housekeeping)."""
