"""Per evaluation report: commands passed, the least spare under the bars over the passed commands,
and the signed yaw-rate offset (achieved minus commanded, rad/s; + is left) over the 17 commands:
its mean and its range. Usage: python yaw_offset.py REPORT.json [...]"""

import json
import statistics
import sys

for path in sys.argv[1:]:
    cases = json.load(open(path))["reports"]["mjwarp"]["cases"]
    offsets = [case["achieved"][2] - case["command"][2] for case in cases]
    passed = [case for case in cases if case["passed"]]
    spare_planar = min(0.25 - case["lin_vel_error"] for case in passed)
    spare_yaw = min(0.25 - case["ang_vel_error"] for case in passed)
    print(f"{path}: passed {len(passed):2d}/{len(cases)}  least spare {spare_planar:.3f} / {spare_yaw:.3f}  "
          f"yaw offset mean {statistics.mean(offsets):+.3f} range [{min(offsets):+.2f}, {max(offsets):+.2f}]")
