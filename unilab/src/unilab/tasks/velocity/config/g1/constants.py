"""G1 constants the velocity owners use: feet, torso, reset keyframe, posture tolerances
(the action scale is the robot's own: ``unilab.assets.g1_scene.g1_action_scale``). They
belong to the robot and the task, not to the generic runtime's defaults."""

from __future__ import annotations

RESET_KEYFRAME = "knees_bent"
TORSO = "torso_link"
FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
CONTACT_HEIGHT = 0.06  # foot origin is 0.038 m above the floor when flat

# Rationale (mjlab): legs loose in pitch/knee for the stride, tight in roll; waist tight.
POSTURE = {
    "std_standing": {".*": 0.05},
    "std_walking": {r".*hip_pitch.*": 0.3, r".*hip_roll.*": 0.15, r".*hip_yaw.*": 0.15, r".*knee.*": 0.35,
                    r".*ankle_pitch.*": 0.25, r".*ankle_roll.*": 0.1, r".*waist_yaw.*": 0.2,
                    r".*waist_roll.*": 0.08, r".*waist_pitch.*": 0.1, r".*shoulder_pitch.*": 0.15,
                    r".*shoulder_roll.*": 0.15, r".*shoulder_yaw.*": 0.1, r".*elbow.*": 0.15, r".*wrist.*": 0.3},
    "std_running": {r".*hip_pitch.*": 0.5, r".*hip_roll.*": 0.2, r".*hip_yaw.*": 0.2, r".*knee.*": 0.6,
                    r".*ankle_pitch.*": 0.35, r".*ankle_roll.*": 0.15, r".*waist_yaw.*": 0.3,
                    r".*waist_roll.*": 0.08, r".*waist_pitch.*": 0.2, r".*shoulder_pitch.*": 0.5,
                    r".*shoulder_roll.*": 0.2, r".*shoulder_yaw.*": 0.15, r".*elbow.*": 0.35, r".*wrist.*": 0.3},
    "walking_threshold": 0.05,
    "running_threshold": 1.5,
}
