"""Asset authoring (leaf I/O): the pinned G1 robot files and the project's own scene."""

from unilab.assets.g1_scene import G1_JOINT_NAMES, g1_scene_path, g1_scene_xml
from unilab.assets.robot_files import g1_robot_xml

__all__ = ["G1_JOINT_NAMES", "g1_robot_xml", "g1_scene_path", "g1_scene_xml"]
