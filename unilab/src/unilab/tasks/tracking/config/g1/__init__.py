"""The Unitree G1 (29 DoF) owners of the tracking task."""
