"""Whole-body motion tracking (BeyondMimic-style): follow a reference clip of the robot.

``mdp/`` holds the task's terms (the motion command, its reset event, observations, fused
rewards and terminations); ``config/<robot>/`` the robot-specific owners.
"""
