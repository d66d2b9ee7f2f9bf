"""Benchmarks of the unisim adapters against raw engine stepping (MuJoCo Warp graph replay,
mujoco.rollout, Genesis). Not part of the contract: nothing in ``unisim`` imports this package."""
