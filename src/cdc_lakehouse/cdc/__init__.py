"""Change application shared by the local runtime and the pipelines: AUTO CDC (SCD1/SCD2) and
turning full snapshots into the few changes that reach them."""
