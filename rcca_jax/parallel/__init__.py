"""Device meshes (data, fsdp, expert, tensor) and logical-axis partitioning rules."""
