"""Velocity tracking: a body-frame twist command and the terms that reward following it.

``mdp/`` holds the task's terms (command, sensors, rewards, observations, curriculum);
``config/<robot>/`` the robot-specific owners built from them.
"""
